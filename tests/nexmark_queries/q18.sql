-- Nexmark q18, find last bid: each bidder's last bid on each auction.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q18 AS
SELECT auction, bidder, price, channel, url, date_time, extra
FROM (
    SELECT *, row_number() OVER (PARTITION BY bidder, auction
                                 ORDER BY date_time DESC, extra) AS rank_number
    FROM bid
) AS t
WHERE rank_number <= 1;
