-- Nexmark q7, highest bid: the bids carrying the highest price of their 10-second tumbling
-- window.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q7 AS
SELECT b.auction, b.price, b.bidder, b.date_time, b.extra
FROM bid AS b
JOIN (
    SELECT max(w.price) AS maxprice, w.window_end AS date_time
    FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) AS w
    GROUP BY w.window_end
) AS b1 ON b.price = b1.maxprice
WHERE b.date_time BETWEEN b1.date_time - INTERVAL '10' SECOND AND b1.date_time;
