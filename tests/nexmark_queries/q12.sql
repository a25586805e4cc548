-- Nexmark q12, processing-time windows: bids per bidder per 10-second tumbling window of
-- processing time (PROCTIME(), the time the view computes the row). Which window a bid falls
-- in depends on when it was processed, so the check reads, per bidder, the bids counted over
-- all windows and whether every window is a 10-second one aligned to the epoch.
-- check: SELECT bidder, sum(bid_count), bool_and(endtime = starttime + INTERVAL '10' SECOND AND date_bin(INTERVAL '10' SECOND, starttime) = starttime) FROM {view} GROUP BY bidder
-- After https://github.com/nexmark/nexmark (nexmark-flink queries, a view B adding
-- PROCTIME() AS p_time to bid, grouped by TUMBLE(p_time, INTERVAL '10' SECOND)), with the
-- tumbling window written as date_bin (a window table function takes a named relation).
CREATE MATERIALIZED VIEW q12 AS
SELECT b.bidder, count(*) AS bid_count,
       date_bin(INTERVAL '10' SECOND, b.p_time) AS starttime,
       date_bin(INTERVAL '10' SECOND, b.p_time) + INTERVAL '10' SECOND AS endtime
FROM (SELECT bidder, PROCTIME() AS p_time FROM bid) AS b
GROUP BY b.bidder, date_bin(INTERVAL '10' SECOND, b.p_time);
