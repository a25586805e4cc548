-- Nexmark q11, user sessions: bids per bidder per session (a gap of 10 seconds ends a
-- session). Needs SESSION windows.
-- refused: 0A000
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q11 AS
SELECT w.bidder, count(*) AS bid_count, w.window_start AS starttime, w.window_end AS endtime
FROM SESSION(bid, date_time, INTERVAL '10' SECOND) AS w
GROUP BY w.bidder, w.window_start, w.window_end;
