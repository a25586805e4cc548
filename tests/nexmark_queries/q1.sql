-- Nexmark q1, currency conversion: bid prices from dollars to euros.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q1 AS
SELECT auction, bidder, 0.908 * price AS price, date_time, extra
FROM bid;
