-- Nexmark q0, pass-through: every bid, unchanged.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q0 AS
SELECT auction, bidder, price, date_time, extra
FROM bid;
