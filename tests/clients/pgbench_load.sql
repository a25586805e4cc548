-- pgbench's custom script for tests/clients/pgbench.sh: each transaction appends one event
-- of the client (amount client_id + 1) and reads the client's running total from a view.
\set amount :client_id + 1
BEGIN;
INSERT INTO pgb_events (mode, client, amount) VALUES (:mode, :client_id, :amount);
END;
SELECT n, total FROM pgb_totals WHERE mode = :mode AND client = :client_id;
