// E2B's SDK across a restart of `execbox serve --session-state-dir` (restart.sh runs it twice,
// the server stopped with SIGTERM and started again between). Phase "before" makes a paused
// sandbox (a variable, a file, a background process's file), a running one with a second
// context, and a snapshot of it, and writes their ids to HANDOFF; phase "after" finds each
// again: listed as it was, resumed with its state, the running one's access token unchanged,
// its context there, and a sandbox made from the snapshot.
//   node restart_test.mjs before|after HANDOFF
import { readFileSync, writeFileSync } from 'node:fs'
import { Sandbox } from '@e2b/code-interpreter'

const [phase, handoff] = process.argv.slice(2)
let passed = 0
let failed = 0

function assert(condition, message) {
  if (!condition) throw new Error(message)
}

async function check(name, fn) {
  try {
    await fn()
    passed++
    console.log(`ok - restart ${phase}: ${name}`)
  } catch (e) {
    failed++
    console.log(`not ok - restart ${phase}: ${name}: ${e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e}`)
  }
}

async function waitFor(condition, what, ms = 10_000) {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    if (await condition()) return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`${what}: not within ${ms} ms`)
}

if (phase === 'before') {
  const ids = {}
  await check('a paused sandbox, a running one with a context, a snapshot', async () => {
    const a = await Sandbox.create({ timeoutMs: 300_000, metadata: { suite: 'restart', which: 'a' } })
    await a.runCode('v = 5')
    await a.files.write('a.txt', 'A')
    await a.commands.run('echo bg > bg.txt; sleep 300', { background: true })
    await waitFor(async () => (await a.files.exists('bg.txt')), 'the background file')
    assert((await a.pause()) === true, 'paused')
    const b = await Sandbox.create({ timeoutMs: 300_000, metadata: { suite: 'restart', which: 'b' } })
    await b.runCode('u = 6')
    await b.files.write('b.txt', 'B', { metadata: { kept: 'yes' } })
    const ctx = await b.createCodeContext()
    await b.runCode('c = 7', { context: ctx })
    const js = await b.createCodeContext({ language: 'javascript' })
    await b.runCode('const kept = 1', { context: js })
    const snap = await b.createSnapshot({ name: 'restart-snap' })
    Object.assign(ids, { a: a.sandboxId, b: b.sandboxId, token: b.envdAccessToken, ctx: ctx.id, js: js.id, snap: snap.snapshotId })
  })
  writeFileSync(handoff, JSON.stringify(ids))
} else {
  const ids = JSON.parse(readFileSync(handoff, 'utf8'))
  await check('the list says which is paused and which runs', async () => {
    const paused = await Sandbox.list({ query: { state: ['paused'], metadata: { suite: 'restart' } } }).nextItems()
    assert(paused.length === 1 && paused[0].sandboxId === ids.a, `paused: ${JSON.stringify(paused)}`)
    const running = await Sandbox.list({ query: { state: ['running'], metadata: { suite: 'restart' } } }).nextItems()
    assert(running.length === 1 && running[0].sandboxId === ids.b, `running: ${JSON.stringify(running)}`)
  })
  await check('connect resumes the paused one with its variable and files', async () => {
    const a = await Sandbox.connect(ids.a)
    assert((await a.runCode('v')).text === '5', 'v')
    assert((await a.files.read('a.txt')) === 'A', 'a.txt')
    assert((await a.files.read('bg.txt')) === 'bg\n', 'the background process\'s file')
    await a.kill()
  })
  await check('the running one answers its old token, with its state and its context', async () => {
    const res = await fetch(`${process.env.E2B_SANDBOX_URL}/contexts`, {
      headers: { 'E2b-Sandbox-Id': ids.b, 'E2b-Sandbox-Port': '49999', 'X-Access-Token': ids.token },
    })
    assert(res.status === 200, `the old token: ${res.status}`)
    const listed = await res.json()
    const contexts = listed.map((c) => c.id)
    assert(contexts.includes(ids.ctx) && contexts.includes('default'), `contexts: ${contexts}`)
    assert(listed.some((c) => c.id === ids.js && c.language === 'javascript'), JSON.stringify(listed))
    const b = await Sandbox.connect(ids.b)
    assert((await b.runCode('u')).text === '6', 'u')
    assert((await b.files.read('b.txt')) === 'B', 'b.txt')
    assert((await b.files.getInfo('b.txt')).metadata?.kept === 'yes', "b.txt's metadata")
    const r = await b.runCode('1 + 1', { context: { id: ids.ctx, language: 'python', cwd: '/home/user' } })
    assert(r.text === '2', `the context runs: ${JSON.stringify(r.error)}`)
    // The javascript context is back, its kernel a new one.
    const j = await b.runCode('typeof kept', { context: { id: ids.js, language: 'javascript', cwd: '/home/user' } })
    assert(j.text === 'undefined', `the javascript context: ${j.text} ${JSON.stringify(j.error)}`)
    await b.kill()
  })
  await check('a sandbox is made from the snapshot kept before the restart', async () => {
    const listed = await Sandbox.listSnapshots({ name: 'restart-snap' }).nextItems()
    assert(listed.length === 1 && listed[0].snapshotId === ids.snap, `listed: ${JSON.stringify(listed)}`)
    const c = await Sandbox.create(ids.snap, { timeoutMs: 60_000 })
    assert((await c.runCode('u')).text === '6', 'u from the snapshot')
    await c.kill()
    assert((await Sandbox.deleteSnapshot(ids.snap)) === true, 'deleted')
  })
}
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
