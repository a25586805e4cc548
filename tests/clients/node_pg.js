// node-postgres (`pg` from npm) against Weir. Queries without values go as simple Query
// messages, with values through Parse/Bind/Execute with untyped text parameters (the server
// infers their types); named queries are prepared once per connection. node-postgres returns
// int8 and numeric as strings and timestamptz and date as Date objects.
'use strict';

const pg = require('pg');

const CLIENT = 'node-pg';
const T = 'npg_orders';
const V = 'npg_by_customer';
const COLS = 'id, customer, qty, price, paid, placed, day';
const INSERT = `INSERT INTO ${T} (${COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7)`;
const ROWS = [
  [1, 'ada', 3, '2.50', true, new Date('2024-03-01T10:00:00Z'), '2024-03-01'],
  [2, 'bob', 5, '10.00', false, new Date('2024-03-02T11:30:00Z'), '2024-03-02'],
  [3, 'ada', 7, '1.25', true, new Date('2024-03-03T12:45:00Z'), '2024-03-03'],
];

const config = {
  host: process.env.PGHOST || '127.0.0.1',
  port: Number(process.env.PGPORT || 9347),
  user: process.env.PGUSER || 'weir',
  database: process.env.PGDATABASE || 'weir',
};

function show(v) {
  return v instanceof Date ? `Date(${v.toISOString()})` : `${JSON.stringify(v)} (${typeof v})`;
}

function eq(actual, expected, what) {
  const same = actual instanceof Date && expected instanceof Date
    ? actual.getTime() === expected.getTime()
    : actual === expected;
  if (!same) throw new Error(`${what}: got ${show(actual)}, expected ${show(expected)}`);
}

function reason(err) {
  const first = String(err.message || err).split('\n')[0];
  return (err.code ? `${err.code} ${first}` : first).slice(0, 300);
}

// A DATE comes back as a Date at local midnight of that day.
function ymd(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}

async function main() {
  const client = new pg.Client(config);
  const one = async (text, values) => (await client.query(text, values)).rows[0];

  const checks = [
    ['connect', async () => {
      await client.connect();
      const { version } = await one('SELECT version() AS version');
      if (!version.startsWith('PostgreSQL ')) throw new Error(`version() is ${version}`);
    }],
    ['select_int4_literal', async () => {
      const r = await client.query('SELECT 1 AS one');
      eq(r.fields[0].dataTypeID, 23, 'type OID of SELECT 1');
      eq(r.rows[0].one, 1, 'SELECT 1');
    }],
    ['create_table', async () => {
      await client.query(`DROP TABLE IF EXISTS ${T} CASCADE`);
      await client.query(`CREATE TABLE ${T} (id BIGINT PRIMARY KEY, customer TEXT NOT NULL, `
        + 'qty INTEGER, price NUMERIC(10,2), paid BOOLEAN, placed TIMESTAMPTZ, day DATE)');
      eq((await one(`SELECT count(*) AS n FROM ${T}`)).n, '0', 'rows in the new table');
    }],
    ['insert_params', async () => {
      for (const row of ROWS) await client.query(INSERT, row);
      eq((await one(`SELECT count(*) AS n FROM ${T}`)).n, '3', 'rows');
    }],
    ['select_typed_params', async () => {
      const r = await client.query(
        `SELECT ${COLS} FROM ${T} WHERE customer = $1 AND qty >= $2 AND placed < $3 ORDER BY id`,
        ['ada', 3, new Date('2024-03-10T00:00:00Z')]);
      eq(r.rows.length, 2, 'rows of ada');
      [ROWS[0], ROWS[2]].forEach((want, i) => {
        const got = r.rows[i];
        eq(got.id, String(want[0]), 'id (int8 as string)');
        eq(got.customer, want[1], 'customer');
        eq(got.qty, want[2], 'qty');
        eq(got.price, want[3], 'price (numeric as string)');
        eq(got.paid, want[4], 'paid');
        eq(got.placed, want[5], 'placed');
        eq(ymd(got.day), want[6], 'day');
      });
    }],
    ['aggregate', async () => {
      const r = await one(`SELECT sum(qty * price) AS value, sum(qty) AS qty, count(*) AS n FROM ${T}`);
      // 3 * 2.50 + 5 * 10.00 + 7 * 1.25 = 66.25
      eq(Number(r.value), 66.25, 'sum(qty * price)');
      eq(r.qty, '15', 'sum(qty)');
      eq(r.n, '3', 'count(*)');
    }],
    ['materialized_view', async () => {
      await client.query(`CREATE MATERIALIZED VIEW ${V} AS SELECT customer, count(*) AS n, `
        + `sum(qty) AS qty FROM ${T} WHERE id < 10 GROUP BY customer`);
      await client.query(INSERT, [4, 'bob', 11, '3.00', false, new Date('2024-03-04T00:00:00Z'), '2024-03-04']);
      await client.query('FLUSH');
      const r = await client.query(`SELECT customer, n, qty FROM ${V} ORDER BY customer`);
      eq(JSON.stringify(r.rows), JSON.stringify([
        { customer: 'ada', n: '2', qty: '10' }, { customer: 'bob', n: '2', qty: '16' }]), 'view rows');
    }],
    ['simple_query', async () => {
      const r = await one(`SELECT customer, qty, paid FROM ${T} WHERE id = 2`);
      eq(r.customer, 'bob', 'customer');
      eq(r.qty, 5, 'qty');
      eq(r.paid, false, 'paid');
    }],
    ['param_inference', async () => {
      // Untyped parameters compared with timestamptz and boolean columns.
      const r = await one(`SELECT sum(qty) AS s FROM ${T} WHERE placed >= $1 AND paid = $2`,
        [new Date('2024-03-02T00:00:00Z'), true]);
      eq(r.s, '7', 'sum(qty) of paid orders from March 2');
    }],
    ['limit_param', async () => {
      const r = await client.query(`SELECT id FROM ${T} ORDER BY id LIMIT $1`, [2]);
      eq(r.rows.map((x) => x.id).join(','), '1,2', 'first two ids');
    }],
    ['any_array_param', async () => {
      // A JS array is sent as the text '{1,3}' with no type: the server infers bigint[].
      const r = await client.query(`SELECT id FROM ${T} WHERE id = ANY($1) ORDER BY id`, [[1, 3]]);
      eq(r.rows.map((x) => x.id).join(','), '1,3', 'ids 1 and 3');
    }],
    ['named_prepared', async () => {
      const got = [];
      for (const id of [1, 2, 3]) {
        const r = await client.query({ name: 'npg-qty', text: `SELECT qty FROM ${T} WHERE id = $1`, values: [id] });
        got.push(r.rows[0].qty);
      }
      eq(JSON.stringify(got), '[3,5,7]', 'qty of ids 1..3');
    }],
    ['row_mode_array', async () => {
      const r = await client.query({ text: `SELECT customer, qty FROM ${T} WHERE id = $1`, values: [3], rowMode: 'array' });
      eq(JSON.stringify(r.rows), '[["ada",7]]', 'row as an array');
    }],
    ['transaction_commit', async () => {
      await client.query('BEGIN');
      await client.query(INSERT, [20, 'dee', 4, '0.50', true, null, null]);
      await client.query('COMMIT');
      eq((await one(`SELECT count(*) AS n FROM ${T} WHERE id = 20`)).n, '1', 'committed row');
    }],
    ['transaction_rollback', async () => {
      await client.query('BEGIN');
      await client.query(INSERT, [21, 'dee', 4, '0.50', true, null, null]);
      await client.query('ROLLBACK');
      eq((await one(`SELECT count(*) AS n FROM ${T} WHERE id = 21`)).n, '0', 'rows left by a rolled-back insert');
    }],
    ['error_code', async () => {
      let code = null;
      try {
        await client.query(INSERT, [1, 'dup', 1, null, null, null, null]);
      } catch (e) {
        code = e.code;
      }
      eq(code, '23505', 'SQLSTATE of a duplicate key');
      eq((await one(`SELECT customer FROM ${T} WHERE id = 1`)).customer, 'ada', 'row 1 after the error');
    }],
    ['pool', async () => {
      const pool = new pg.Pool({ ...config, max: 3 });
      try {
        const rs = await Promise.all([1, 2, 3].map((id) => pool.query(`SELECT qty FROM ${T} WHERE id = $1`, [id])));
        eq(rs.map((r) => r.rows[0].qty).join(','), '3,5,7', 'qty of ids 1..3 on three connections');
      } finally {
        await pool.end();
      }
    }],
  ];

  for (const [name, fn] of checks) {
    try {
      await fn();
      console.log(`PASS ${CLIENT} ${name}`);
    } catch (e) {
      console.log(`FAIL ${CLIENT} ${name}: ${reason(e)}`);
      if (name === 'connect') break;
    }
  }
  await client.end().catch(() => {});
}

main().then(() => process.exit(0), (e) => {
  console.error(e);
  process.exit(2);
});
