-- Nexmark q3, local item suggestion: sellers in Oregon, Idaho or California and their
-- auctions in category 10.
-- After https://github.com/nexmark/nexmark (nexmark-flink queries) and RisingWave's
-- e2e_test/streaming/nexmark views, written for Weir's tables.
CREATE MATERIALIZED VIEW q3 AS
SELECT p.name, p.city, p.state, a.id
FROM auction AS a
JOIN person AS p ON a.seller = p.id
WHERE a.category = 10 AND (p.state = 'OR' OR p.state = 'ID' OR p.state = 'CA');
