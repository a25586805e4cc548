-- Nexmark q19, auction top-10 price: the ten highest bids of each auction.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q19 AS
SELECT *
FROM (
    SELECT *, row_number() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number
    FROM bid
) AS t
WHERE rank_number <= 10;
