-- Nexmark q9, winning bids: each auction with its highest bid made while it was open.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q9 AS
SELECT id, item_name, description, initial_bid, reserve, date_time, expires, seller, category,
       auction, bidder, price, bid_date_time
FROM (
    SELECT a.*, b.auction, b.bidder, b.price, b.date_time AS bid_date_time,
           row_number() OVER (PARTITION BY a.id ORDER BY b.price DESC, b.date_time ASC) AS rownum
    FROM auction AS a
    JOIN bid AS b ON a.id = b.auction
    WHERE b.date_time BETWEEN a.date_time AND a.expires
) AS tmp
WHERE rownum <= 1;
