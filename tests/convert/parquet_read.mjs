// Reads the Parquet files of `gpumemprof convert --parquet` with two readers nobody here wrote:
// DuckDB (npm @duckdb/node-api: DuckDB's own C++ Parquet reader) and hyparquet (a pure JavaScript
// reader, with hyparquet-compressors for zstd), and prints one JSON object on stdout:
//
//   node parquet_read.mjs NODEDEPS FILE.parquet...
//   {"files": {FILE: {"rows": [...DuckDB's rows...], "same": true|false, "diff": "...",
//                      "columns": [{"name", "type", "encodings", "dictionary_page_offset",
//                                   "stats_min", "stats_max", "stats_null_count", "compression"}],
//                      "row_groups": N, "hyparquet_stats": {column: {"min", "max", "null_count"}}},
//    ...}, "errors": [...]}
//
//   node parquet_read.mjs NODEDEPS --sql DIR QUERY...
//   {"results": [{"rows": [...]} or {"error": "..."}]}: each query run by DuckDB, its paths
//   'job/...' read as 'DIR/...' (the queries of docs/fleet.md)
//
//   node parquet_read.mjs NODEDEPS --hive DIR TABLE
//   {"rows": [...]}: DuckDB's read_parquet('DIR/*/TABLE.parquet', hive_partitioning = true)
//
// Values are written as strings (64-bit integers exceed JavaScript numbers), null as null, so that
// both readers' rows compare exactly. Rows: each reader's, in file order.
import { createRequire } from 'module'
import path from 'path'

const [nodedeps, ...args] = process.argv.slice(2)
const require = createRequire(path.join(path.resolve(nodedeps), 'package.json'))
const { DuckDBInstance } = require('@duckdb/node-api')
const hyparquet = await import(require.resolve('hyparquet'))
const { compressors } = await import(require.resolve('hyparquet-compressors'))

function canon(v) {
  if (v === null || v === undefined) return null
  if (typeof v === 'object' && typeof v.toString === 'function' && !(v instanceof Array)) return String(v)
  return String(v)
}

function canonRow(o) {
  const r = {}
  for (const k of Object.keys(o)) r[k] = canon(o[k])
  return r
}

function sqlString(s) {
  return "'" + s.replace(/'/g, "''") + "'"
}

const inst = await DuckDBInstance.create(':memory:')
const con = await inst.connect()

async function rowsOf(sql) {
  const r = await con.runAndReadAll(sql)
  const cols = r.columnNames()
  return r.getRows().map((row) => {
    const o = {}
    cols.forEach((c, i) => { o[c] = canon(row[i]) })
    return o
  })
}

if (args[0] === '--sql') { // --sql DIR SQL...: each query with 'job' standing for DIR
  const [, dir, ...queries] = args
  const results = []
  for (const q of queries) {
    try {
      results.push({ rows: await rowsOf(q.replaceAll("'job/", sqlString(dir + '/').slice(0, -1))) })
    } catch (e) {
      results.push({ error: e.message })
    }
  }
  process.stdout.write(JSON.stringify({ results }))
  process.exit(0)
}

if (args[0] === '--hive') {
  const [, dir, table] = args
  const rows = await rowsOf(`select * from read_parquet(${sqlString(path.join(dir, '*', table + '.parquet'))}, hive_partitioning = true)`)
  // exit once the whole output is written: process.exit() drops what a pipe has not taken yet
  process.stdout.write(JSON.stringify({ rows }), () => process.exit(0))
  await new Promise(() => {})
}

const out = { files: {}, errors: [] }
for (const f of args) {
  const res = {}
  out.files[f] = res
  try {
    res.rows = await rowsOf(`select * from read_parquet(${sqlString(f)}, hive_partitioning = false)`)
    const meta = await rowsOf(`select * from parquet_metadata(${sqlString(f)})`)
    res.row_groups = new Set(meta.map((m) => m.row_group_id)).size
    res.columns = meta.filter((m) => m.row_group_id === '0').map((m) => ({
      name: m.path_in_schema, type: m.type, encodings: m.encodings,
      dictionary_page_offset: m.dictionary_page_offset, compression: m.compression,
      stats_min: m.stats_min_value, stats_max: m.stats_max_value,
      stats_null_count: m.stats_null_count,
    }))
    res.chunks = meta.map((m) => ({
      row_group: m.row_group_id, name: m.path_in_schema, num_values: m.num_values,
      stats_min: m.stats_min_value, stats_max: m.stats_max_value,
      stats_null_count: m.stats_null_count, encodings: m.encodings,
    }))
  } catch (e) {
    out.errors.push(`duckdb: ${f}: ${e.message}`)
    continue
  }
  try {
    const file = await hyparquet.asyncBufferFromFile(f)
    const hrows = (await hyparquet.parquetReadObjects({ file, compressors })).map(canonRow)
    const md = await hyparquet.parquetMetadataAsync(file)
    res.hyparquet_stats = {}
    for (const col of md.row_groups[0]?.columns ?? []) {
      const s = col.meta_data.statistics ?? {}
      res.hyparquet_stats[col.meta_data.path_in_schema.join('.')] = {
        min: canon(s.min_value), max: canon(s.max_value), null_count: canon(s.null_count),
        encodings: col.meta_data.encodings,
      }
    }
    res.hyparquet_rows = hrows.length
    res.same = hrows.length === res.rows.length
    res.diff = res.same ? '' : `hyparquet ${hrows.length} rows, duckdb ${res.rows.length}`
    for (let i = 0; res.same && i < hrows.length; i++) {
      const a = JSON.stringify(res.rows[i]), b = JSON.stringify(hrows[i])
      if (a !== b) {
        res.same = false
        res.diff = `row ${i}: duckdb ${a} hyparquet ${b}`
      }
    }
  } catch (e) {
    out.errors.push(`hyparquet: ${f}: ${e.message}`)
  }
}
process.stdout.write(JSON.stringify(out))
