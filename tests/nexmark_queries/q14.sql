-- Nexmark q14, calculation: converted prices in a range, a time-of-day label and the number
-- of 'c's in extra. The original counts them with a user-defined function; Weir has none
-- (CREATE FUNCTION is refused), so its SQL body is written inline.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q14 AS
SELECT auction, bidder, 0.908 * price AS price,
       CASE
           WHEN extract(hour FROM date_time) >= 8 AND extract(hour FROM date_time) <= 18
               THEN 'dayTime'
           WHEN extract(hour FROM date_time) <= 6 OR extract(hour FROM date_time) >= 20
               THEN 'nightTime'
           ELSE 'otherTime'
       END AS bid_time_type,
       date_time, extra,
       length(extra) - length(replace(extra, 'c', '')) AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
