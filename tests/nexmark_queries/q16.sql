-- Nexmark q16, channel statistics report: q15 per channel and day, with the day's last
-- minute seen.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q16 AS
SELECT channel,
       to_char(date_time, 'YYYY-MM-DD') AS day,
       max(to_char(date_time, 'HH24:MI')) AS minute,
       count(*) AS total_bids,
       count(*) FILTER (WHERE price < 10000) AS rank1_bids,
       count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
       count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
       count(DISTINCT bidder) AS total_bidders,
       count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
       count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bidders,
       count(DISTINCT bidder) FILTER (WHERE price >= 1000000) AS rank3_bidders,
       count(DISTINCT auction) AS total_auctions,
       count(DISTINCT auction) FILTER (WHERE price < 10000) AS rank1_auctions,
       count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_auctions,
       count(DISTINCT auction) FILTER (WHERE price >= 1000000) AS rank3_auctions
FROM bid
GROUP BY channel, to_char(date_time, 'YYYY-MM-DD');
