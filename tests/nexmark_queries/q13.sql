-- Nexmark q13, bounded side input join: bids joined with a static side table as of their
-- processing time. Needs PROCTIME() and FOR SYSTEM_TIME AS OF.
-- refused: 42601
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE TABLE side_input (key BIGINT, value VARCHAR);
CREATE MATERIALIZED VIEW q13 AS
SELECT b.auction, b.bidder, b.price, b.date_time, s.value
FROM (SELECT *, proctime() AS p_time FROM bid) AS b
JOIN side_input FOR SYSTEM_TIME AS OF b.p_time AS s ON b.auction % 10000 = s.key;
