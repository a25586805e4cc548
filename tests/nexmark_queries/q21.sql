-- Nexmark q21, add channel id: a channel id for the four named channels, else the
-- channel_id parameter of the url; bids with neither are dropped.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q21 AS
SELECT auction, bidder, price, channel,
       CASE
           WHEN lower(channel) = 'apple' THEN '0'
           WHEN lower(channel) = 'google' THEN '1'
           WHEN lower(channel) = 'facebook' THEN '2'
           WHEN lower(channel) = 'baidu' THEN '3'
           ELSE (regexp_match(url, '(&|^)channel_id=([^&]*)'))[2]
       END AS channel_id
FROM bid
WHERE (regexp_match(url, '(&|^)channel_id=([^&]*)'))[2] IS NOT NULL
   OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu');
