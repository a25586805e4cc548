-- Nexmark q4, average price per category: the winning (highest) bid of each auction among
-- the bids made while it was open, averaged per category.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q4 AS
SELECT q.category, avg(q.final) AS avg
FROM (
    SELECT max(b.price) AS final, a.category
    FROM auction AS a
    JOIN bid AS b ON a.id = b.auction
    WHERE b.date_time BETWEEN a.date_time AND a.expires
    GROUP BY a.id, a.category
) AS q
GROUP BY q.category;
