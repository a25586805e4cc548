-- Nexmark q8, monitor new users: people who opened an auction in the 10-second tumbling
-- window in which they registered.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q8 AS
SELECT p.id, p.name, p.starttime
FROM (
    SELECT w.id, w.name, w.window_start AS starttime, w.window_end AS endtime
    FROM TUMBLE(person, date_time, INTERVAL '10' SECOND) AS w
    GROUP BY w.id, w.name, w.window_start, w.window_end
) AS p
JOIN (
    SELECT w.seller, w.window_start AS starttime, w.window_end AS endtime
    FROM TUMBLE(auction, date_time, INTERVAL '10' SECOND) AS w
    GROUP BY w.seller, w.window_start, w.window_end
) AS a ON p.id = a.seller AND p.starttime = a.starttime AND p.endtime = a.endtime;
