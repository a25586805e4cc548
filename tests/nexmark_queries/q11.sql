-- Nexmark q11, user sessions: bids per bidder per session (a gap of more than 10 seconds
-- between a bidder's bids ends a session).
-- After https://github.com/nexmark/nexmark (nexmark-flink queries, which group by
-- SESSION(dateTime, INTERVAL '10' SECOND) per bidder) in Flink's window table function form
-- with the bidder as the session key, written for Weir's tables.
CREATE MATERIALIZED VIEW q11 AS
SELECT w.bidder, count(*) AS bid_count, w.window_start AS starttime, w.window_end AS endtime
FROM TABLE(SESSION(TABLE bid PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) AS w
GROUP BY w.bidder, w.window_start, w.window_end;
