// E2B's SDK against `execbox serve` (bench/e2b_bench.sh starts it): the latency of the SDK's
// common calls, p50 and p90 of N rounds each, beside what the same server answers through its
// own API (/v1/sessions/{id}/execute) and a plain `python3 -c 'print(1)'` measured in the same
// run. Ratios are to python3 -c.
//   node e2b_sdk.mjs ROUNDS BEARER_TOKEN
import { execFileSync } from 'node:child_process'
import { Sandbox } from '@e2b/code-interpreter'

const rounds = Number(process.argv[2] || 20)
const bearer = process.argv[3]
const url = process.env.E2B_API_URL

async function measure(fn) {
  await fn() // warm-up
  const times = []
  for (let i = 0; i < rounds; i++) {
    const start = performance.now()
    await fn()
    times.push(performance.now() - start)
  }
  times.sort((a, b) => a - b)
  return { p50: times[Math.floor(times.length / 2)], p90: times[Math.floor(times.length * 0.9)] }
}

const rows = []
const baseline = await measure(async () => execFileSync('/usr/bin/python3', ['-c', 'print(1)']))
rows.push(['/usr/bin/python3 -c print(1) (baseline)', baseline])

const sbx = await Sandbox.create()
rows.push(["runCode('print(1)')", await measure(() => sbx.runCode('print(1)'))])
rows.push(["runCode('x = 1; x')", await measure(() => sbx.runCode('x = 1\nx'))])
await sbx.runCode('import pandas as pd\ndf = pd.DataFrame({"a": range(100)})')
rows.push(['runCode(DataFrame -> html)', await measure(() => sbx.runCode('df.head()'))])
rows.push(["commands.run('echo hi')", await measure(() => sbx.commands.run('echo hi'))])
// The other languages' contexts: a kernel process kept between executions (its first start
// is the warm-up), against a bash started per call (commands.run) and python3 -c.
rows.push(["runCode('echo hi', bash context)", await measure(() => sbx.runCode('echo hi', { language: 'bash' }))])
rows.push(["runCode('1 + 1', javascript context)", await measure(() => sbx.runCode('1 + 1', { language: 'js' }))])
const kb = 'x'.repeat(1024)
rows.push(['files.write 1 KB', await measure(() => sbx.files.write('bench.txt', kb))])
rows.push(['files.read 1 KB', await measure(() => sbx.files.read('bench.txt'))])
rows.push(['files.list', await measure(() => sbx.files.list('/home/user'))])
rows.push(['Sandbox.create + kill', await measure(async () => (await Sandbox.create()).kill())])

// The same execution through execbox's own API, in a session of the same server.
const headers = { Authorization: `Bearer ${bearer}`, 'Content-Type': 'application/json' }
const session = await (await fetch(`${url}/v1/sessions`, { method: 'POST', headers, body: '{}' })).json()
rows.push([
  '/v1/sessions/{id}/execute print(1)',
  await measure(async () =>
    (await fetch(`${url}/v1/sessions/${session.id}/execute`, { method: 'POST', headers, body: '{"code":"print(1)"}' })).json(),
  ),
])
await fetch(`${url}/v1/sessions/${session.id}`, { method: 'DELETE', headers })
await sbx.kill()

console.log(`E2B SDK against execbox, ${rounds} rounds each (p50 / p90 ms, ratio of p50 to python3 -c):`)
for (const [name, t] of rows) {
  console.log(`  ${name.padEnd(38)} ${t.p50.toFixed(1).padStart(7)} / ${t.p90.toFixed(1).padStart(7)}   ${(t.p50 / baseline.p50).toFixed(2)}x`)
}
