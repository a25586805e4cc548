-- Nexmark q12, processing-time windows: bids per bidder per 10-second tumbling window of
-- processing time. Needs PROCTIME().
-- refused: 42883
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW bid_proctime AS
SELECT *, proctime() AS p_time FROM bid;
CREATE MATERIALIZED VIEW q12 AS
SELECT w.bidder, count(*) AS bid_count, w.window_start AS starttime, w.window_end AS endtime
FROM TUMBLE(bid_proctime, p_time, INTERVAL '10' SECOND) AS w
GROUP BY w.bidder, w.window_start, w.window_end;
