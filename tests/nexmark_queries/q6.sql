-- Nexmark q6, average selling price by seller: the average of each seller's last ten
-- winning bids.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q6 AS
SELECT q.seller,
       avg(q.final) OVER (PARTITION BY q.seller ORDER BY q.date_time
                          ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg
FROM (
    SELECT row_number() OVER (PARTITION BY a.id, a.seller ORDER BY b.price DESC) AS rank,
           a.seller, b.price AS final, b.date_time
    FROM auction AS a
    JOIN bid AS b ON a.id = b.auction
    WHERE b.date_time BETWEEN a.date_time AND a.expires
) AS q
WHERE q.rank <= 1;
