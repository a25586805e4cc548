-- Nexmark q2, selection: the bids on every 123rd auction.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q2 AS
SELECT auction, price
FROM bid
WHERE auction % 123 = 0;
