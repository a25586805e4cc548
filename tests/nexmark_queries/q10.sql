-- Nexmark q10, log to file system: every bid with its day and its hour and minute (the
-- partition columns of the original's file sink; here the view holds the rows).
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q10 AS
SELECT auction, bidder, price, date_time, extra,
       to_char(date_time, 'YYYY-MM-DD') AS dt,
       to_char(date_time, 'HH24:MI') AS hm
FROM bid;
