-- Nexmark q5 as q5.sql, with the window's maximum maxn among the columns.
-- Per 10-second window sliding every 2 seconds, the auctions with the most bids.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q5_maxn AS
SELECT auction_bids.auction, auction_bids.num, auction_bids.starttime, max_bids.maxn
FROM (
    SELECT b.auction, count(*) AS num, b.window_start AS starttime
    FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS b
    GROUP BY b.window_start, b.auction
) AS auction_bids
JOIN (
    SELECT max(count_bids.num) AS maxn, count_bids.starttime_c
    FROM (
        SELECT count(*) AS num, c.window_start AS starttime_c
        FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS c
        GROUP BY c.auction, c.window_start
    ) AS count_bids
    GROUP BY count_bids.starttime_c
) AS max_bids
ON auction_bids.starttime = max_bids.starttime_c AND auction_bids.num >= max_bids.maxn;
