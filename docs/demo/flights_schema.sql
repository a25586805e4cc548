-- Tables and views of the flights demo; the views are created before any data is loaded.
CREATE TABLE airlines (carrier TEXT PRIMARY KEY, name TEXT);
CREATE TABLE flights (
  year INT, month INT, day INT, dep_time INT, sched_dep_time INT, dep_delay INT,
  arr_time INT, sched_arr_time INT, arr_delay INT, carrier TEXT, flight INT, tailnum TEXT,
  origin TEXT, dest TEXT, air_time INT, distance INT, hour INT, minute INT, time_hour TIMESTAMPTZ);
CREATE TABLE weather (
  origin TEXT, year INT, month INT, day INT, hour INT, temp DOUBLE PRECISION,
  dewp DOUBLE PRECISION, humid DOUBLE PRECISION, wind_dir DOUBLE PRECISION,
  wind_speed DOUBLE PRECISION, wind_gust DOUBLE PRECISION, precip DOUBLE PRECISION,
  pressure DOUBLE PRECISION, visib DOUBLE PRECISION, time_hour TIMESTAMPTZ,
  PRIMARY KEY (origin, time_hour));

CREATE MATERIALIZED VIEW carrier_stats AS
  SELECT carrier, count(*) AS flights, count(dep_delay) AS dep_n, sum(dep_delay) AS dep_sum,
         min(dep_delay) AS dep_min, max(arr_delay) AS arr_max, avg(arr_delay) AS arr_avg
  FROM flights GROUP BY carrier;
CREATE MATERIALIZED VIEW airline_routes AS
  SELECT a.name, f.origin, f.dest, count(*) AS n
  FROM flights f JOIN airlines a ON f.carrier = a.carrier GROUP BY a.name, f.origin, f.dest;
CREATE MATERIALIZED VIEW late_dests AS
  SELECT dest, count(*) AS late FROM flights WHERE arr_delay > 60 GROUP BY dest HAVING count(*) > 500;
CREATE MATERIALIZED VIEW origin_month_weather AS
  SELECT f.origin, f.month, count(*) AS n, count(w.temp) AS temp_n, avg(f.dep_delay) AS dep_avg,
         max(w.wind_speed) AS wind_max
  FROM flights f LEFT JOIN weather w ON f.origin = w.origin AND f.time_hour = w.time_hour
  GROUP BY f.origin, f.month;
