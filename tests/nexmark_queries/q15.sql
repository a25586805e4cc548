-- Nexmark q15, bidding statistics report: per day, bids, bidders and auctions in three
-- price ranges.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q15 AS
SELECT to_char(date_time, 'YYYY-MM-DD') AS day,
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
GROUP BY to_char(date_time, 'YYYY-MM-DD');
