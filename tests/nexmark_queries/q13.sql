-- Nexmark q13, bounded side input join: each bid joined with a static side table as it is
-- when the bid is processed (a processing-time temporal join).
-- After https://github.com/nexmark/nexmark (nexmark-flink queries: side_input's 10,000 keys
-- from a file, joined FOR SYSTEM_TIME AS OF a PROCTIME() column on the auction modulo
-- 10,000), with the side table filled by generate_series; written for Weir's tables.
CREATE TABLE IF NOT EXISTS side_input (key BIGINT, value VARCHAR);
INSERT INTO side_input SELECT generate_series, 'value-' || generate_series FROM generate_series(0, 9999)
WHERE NOT EXISTS (SELECT 1 FROM side_input);
CREATE MATERIALIZED VIEW q13 AS
SELECT b.auction, b.bidder, b.price, b.date_time, s.value
FROM (SELECT *, PROCTIME() AS p_time FROM bid) AS b
JOIN side_input FOR SYSTEM_TIME AS OF b.p_time AS s ON b.auction % 10000 = s.key;
