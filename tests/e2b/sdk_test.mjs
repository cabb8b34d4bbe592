// E2B's own JavaScript SDKs against `execbox serve`, unchanged: only E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY point them here (run.sh sets them). Each check prints
// "ok - name" or "not ok - name: why"; the last line is "N passed, N failed".
//   node sdk_test.mjs LABEL OTHER_KEY [PLAIN_KEY]
// OTHER_KEY is a second key of the server's (its sandboxes and the first key's never meet);
// PLAIN_KEY, a key not shaped e2b_<hex>, is tried with SDKs that do not insist on the shape.
import http from 'node:http'
import { Sandbox } from '@e2b/code-interpreter'

const [label, otherKey, plainKey] = process.argv.slice(2)
let passed = 0
let failed = 0

function assert(condition, message) {
  if (!condition) throw new Error(message)
}

async function check(name, fn) {
  try {
    await fn()
    passed++
    console.log(`ok - ${label}: ${name}`)
  } catch (e) {
    failed++
    console.log(`not ok - ${label}: ${name}: ${e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e}`)
  }
}

async function throws(fn, pattern, what) {
  let error
  try {
    await fn()
  } catch (e) {
    error = e
  }
  assert(error, `${what}: no error was thrown`)
  const text = `${error.name}: ${error.message}`
  assert(pattern.test(text), `${what}: the error does not match ${pattern}: ${text}`)
  return error
}

// A GET to this server as to `host` (a sandbox's port by E2B's getHost), on a fresh connection.
function hostGet(host, path, headers = {}) {
  const url = new URL(process.env.E2B_SANDBOX_URL)
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, path, headers: { Host: host, ...headers }, agent: false },
      (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c) => (body += c))
        res.on('end', () => resolve({ status: res.statusCode, body }))
      },
    )
    req.on('error', reject)
    req.end()
  })
}

// Polls `condition` until it holds or `ms` pass.
async function waitFor(condition, what, ms = 10_000) {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    if (await condition()) return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`${what}: not within ${ms} ms`)
}

const sbx = await Sandbox.create({ timeoutMs: 300_000, metadata: { suite: 'e2b', label } })

await check('create gives a sandbox id', async () => {
  assert(typeof sbx.sandboxId === 'string' && sbx.sandboxId.length > 0, `id ${sbx.sandboxId}`)
})

await check("runCode('print(1)')", async () => {
  const e = await sbx.runCode('print(1)')
  assert(JSON.stringify(e.logs.stdout) === JSON.stringify(['1\n']), `stdout ${JSON.stringify(e.logs)}`)
  assert(!e.error, `error ${JSON.stringify(e.error)}`)
})

await check('the last expression is the main result, and state persists', async () => {
  const first = await sbx.runCode('x = 41\nx + 1')
  assert(first.text === '42', `text ${first.text}`)
  assert(first.results.length === 1 && first.results[0].isMainResult, JSON.stringify(first.results))
  const second = await sbx.runCode('x')
  assert(second.text === '41', `text ${second.text}`)
  assert(second.executionCount >= 2, `executionCount ${second.executionCount}`)
})

await check('output streams to the callbacks', async () => {
  const out = []
  const err = []
  await sbx.runCode('import sys\nprint("to out")\nprint("to err", file=sys.stderr)', {
    onStdout: (m) => out.push(m.line),
    onStderr: (m) => err.push(m.line),
  })
  assert(out.join('') === 'to out\n', `stdout ${JSON.stringify(out)}`)
  assert(err.join('') === 'to err\n', `stderr ${JSON.stringify(err)}`)
})

await check("a DataFrame's html", async () => {
  const e = await sbx.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})")
  const main = e.results.find((r) => r.isMainResult)
  assert(main && main.html && main.html.includes('<table'), JSON.stringify(e.results).slice(0, 300))
  assert(main.text.includes('a') && main.text.includes('b'), `text ${main.text}`)
})

await check('a matplotlib figure comes as png', async () => {
  const e = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()')
  const figure = e.results.find((r) => r.png)
  assert(figure, `no png among ${JSON.stringify(e.results.map((r) => r.formats()))}`)
  const bytes = Buffer.from(figure.png, 'base64')
  assert(bytes.subarray(1, 4).toString() === 'PNG', 'not a PNG')
  assert(!figure.isMainResult, 'a figure is not the main result')
})

await check("results in E2B's shape: a str's text, a DataFrame's data, a dict's json, extra", async () => {
  // As on E2B, whose own tests read os.getenv's value this way.
  const env = await sbx.runCode('import os; os.getenv("FOO")', { envs: { FOO: 'bar' } })
  assert(env.results[0]?.text === 'bar', `text ${JSON.stringify(env.results)}`)
  assert((await sbx.runCode('"it\'s"')).text === "it's", 'double-quoted repr')
  assert((await sbx.runCode("('a', 'b')")).text === "('a', 'b')", 'a tuple keeps its quotes')
  const frame = await sbx.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', None]})")
  const main = frame.results[0]
  assert(main.isMainResult && main.html.includes('<table'), JSON.stringify(frame.results).slice(0, 300))
  assert(JSON.stringify(main.data) === '{"a":[1,2],"b":["x",null]}', `data ${JSON.stringify(main.data)}`)
  assert(JSON.stringify(main.extra) === '{}', `extra ${JSON.stringify(main.extra)}`)
  const dict = await sbx.runCode("{'a': 1, 'b': [2, 3]}")
  assert(dict.results[0].json && dict.results[0].json.b[1] === 3, JSON.stringify(dict.results))
  // Another MIME type: in `extra` on the wire, as E2B's server sends it (the JS SDK's `raw`).
  const custom = await sbx.runCode(
    "class C:\n    def _repr_mimebundle_(self, **kw):\n        return {'application/x-thing': 'yes'}\nC()")
  assert(custom.results[0].raw.extra['application/x-thing'] === 'yes', JSON.stringify(custom.results[0].raw))
})

await check("a bar plot's chart", async () => {
  const e = await sbx.runCode(`
import matplotlib.pyplot as plt
plt.figure(figsize=(10, 6))
plt.bar(['Author A', 'Author B', 'Author C', 'Author D'], [100, 200, 300, 400], label='Books Sold', color='blue')
plt.xlabel('Authors')
plt.ylabel('Number of Books Sold')
plt.title('Book Sales by Authors')
plt.tight_layout()
plt.show()
`)
  const figure = e.results[0]
  assert(figure && figure.png && figure.chart, `no chart: ${JSON.stringify(e.results.map((r) => r.formats()))} ${JSON.stringify(e.error)}`)
  const chart = figure.chart
  assert(chart.type === 'bar' && chart.title === 'Book Sales by Authors', JSON.stringify(chart).slice(0, 300))
  assert(chart.x_label === 'Authors' && chart.y_label === 'Number of Books Sold', JSON.stringify(chart).slice(0, 300))
  assert(chart.x_unit === null && chart.y_unit === null, `units ${chart.x_unit} ${chart.y_unit}`)
  assert(JSON.stringify(chart.elements.map((b) => b.value)) === '[100,200,300,400]', JSON.stringify(chart.elements))
  assert(JSON.stringify(chart.elements.map((b) => b.label)) === '["Author A","Author B","Author C","Author D"]',
    JSON.stringify(chart.elements))
  assert(chart.elements.every((b) => b.group === 'Books Sold'), JSON.stringify(chart.elements))
  assert(JSON.stringify(figure.extra) === '{}', `extra ${JSON.stringify(figure.extra)}`)
  const pie = await sbx.runCode("import matplotlib.pyplot as plt\nplt.pie([90, 10], labels=['No', 'Yes'])\nplt.show()")
  assert(pie.results[0].chart.type === 'pie' && pie.results[0].chart.elements[0].angle === 324,
    JSON.stringify(pie.results[0].chart))
})

await check('callbacks: each called once per item, execution counts per context', async () => {
  const seen = { stdout: [], stderr: [], results: [], errors: [] }
  const callbacks = {
    onStdout: (m) => seen.stdout.push(m.line),
    onStderr: (m) => seen.stderr.push(m.line),
    onResult: (r) => seen.results.push(r),
    onError: (e) => seen.errors.push(e),
  }
  const ctx = await sbx.createCodeContext()
  const first = await sbx.runCode(
    'import sys, matplotlib.pyplot as plt\nprint("out")\nprint("err", file=sys.stderr)\nplt.plot([1, 2])\nplt.show()\n41 + 1',
    { context: ctx, ...callbacks })
  assert(JSON.stringify(seen.stdout) === '["out\\n"]' && JSON.stringify(seen.stderr) === '["err\\n"]',
    JSON.stringify(seen))
  assert(seen.results.length === 2 && seen.results[0].png && seen.results[1].text === '42',
    JSON.stringify(seen.results.map((r) => r.formats())))
  assert(seen.errors.length === 0 && first.executionCount === 1, `count ${first.executionCount}`)
  const second = await sbx.runCode('xyz', { context: ctx, ...callbacks })
  assert(seen.errors.length === 1 && seen.errors[0].name === 'NameError', JSON.stringify(seen.errors))
  assert(second.error.name === 'NameError' && second.executionCount === 2, `count ${second.executionCount}`)
  await sbx.removeCodeContext(ctx)
})

await check('onResult is called as a figure is shown, while the code still runs', async () => {
  const order = []
  const run = await sbx.runCode(
    'import time, matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\ntime.sleep(3)\nprint("after")\n7',
    {
      onResult: (r) => order.push(r.png ? 'figure' : `result ${r.text}`),
      onStdout: (m) => order.push(`stdout ${m.line.trim()}`),
    })
  // The figure came 3 s before the print: well before the end of the execution.
  assert(JSON.stringify(order) === '["figure","stdout after","result 7"]', JSON.stringify(order))
  assert(run.results.length === 2 && run.results[0].png && run.results[1].text === '7',
    JSON.stringify(run.results.map((r) => r.formats())))
})

await check('an error has name, value and traceback', async () => {
  const e = await sbx.runCode('def f():\n    return 1 / 0\nf()')
  assert(e.error, 'no error')
  assert(e.error.name === 'ZeroDivisionError', `name ${e.error.name}`)
  assert(e.error.value === 'division by zero', `value ${e.error.value}`)
  assert(typeof e.error.traceback === 'string' && e.error.traceback.includes('return 1 / 0'),
    `traceback ${e.error.traceback}`)
})

await check('env_vars apply to that execution only', async () => {
  const withEnv = await sbx.runCode("import os\nprint(os.environ['E2B_TEST_VAR'])", { envs: { E2B_TEST_VAR: 'yes' } })
  assert(withEnv.logs.stdout.join('') === 'yes\n', JSON.stringify(withEnv.logs))
  const without = await sbx.runCode("import os\nprint(os.environ.get('E2B_TEST_VAR'))")
  assert(without.logs.stdout.join('') === 'None\n', JSON.stringify(without.logs))
})

await check('another language is refused, saying why', async () => {
  const e = await sbx.runCode('x <- 1', { language: 'r' })
  assert(e.error && e.error.name === 'UnsupportedLanguage' && /'r'/.test(e.error.value), JSON.stringify(e.error))
  await throws(() => sbx.createCodeContext({ language: 'cobol' }), /400/, 'a context in another language')
})

await check('a bash context: a shell that keeps its state, its streams apart, exit statuses', async () => {
  const ctx = await sbx.createCodeContext({ language: 'bash' })
  assert(ctx.language === 'bash', JSON.stringify(ctx))
  const out = []
  const first = await sbx.runCode('n=5; echo hi; echo oops >&2; cd /tmp', {
    context: ctx,
    onStdout: (m) => out.push(m.line),
  })
  assert(first.logs.stdout.join('') === 'hi\n' && first.logs.stderr.join('') === 'oops\n', JSON.stringify(first.logs))
  assert(out.join('') === 'hi\n' && !first.error, `onStdout ${JSON.stringify(out)} ${JSON.stringify(first.error)}`)
  const kept = await sbx.runCode('echo $((n + 1)) $(pwd)', { context: ctx })
  assert(kept.logs.stdout.join('') === '6 /tmp\n', JSON.stringify(kept.logs))
  const env = await sbx.runCode('echo "$GREETING"', { context: ctx, envs: { GREETING: 'hello there' } })
  assert(env.logs.stdout.join('') === 'hello there\n', JSON.stringify(env.logs))
  const gone = await sbx.runCode('echo "${GREETING:-unset}"; false', { context: ctx })
  assert(gone.logs.stdout.join('') === 'unset\n', JSON.stringify(gone.logs))
  assert(gone.error && gone.error.name === 'ExitCode' && gone.error.value === '1', JSON.stringify(gone.error))
  // The language's own default context is another shell.
  const other = await sbx.runCode('echo "${n:-none}"; printf no-newline', { language: 'bash' })
  assert(other.logs.stdout.join('') === 'none\nno-newline', JSON.stringify(other.logs))
  // A shell that exits ends its state; the next execution starts another.
  const exited = await sbx.runCode('echo bye; exit 3', { context: ctx })
  assert(exited.error && exited.error.name === 'KernelEnded' && /status 3/.test(exited.error.value),
    JSON.stringify(exited.error))
  const again = await sbx.runCode('echo "${n:-fresh}"; pwd', { context: ctx })
  assert(again.logs.stdout.join('') === 'fresh\n/home/user\n', JSON.stringify(again.logs))
  // Its files are the sandbox's; its process is not in the sandbox's command list.
  await sbx.runCode('echo from-bash > /home/user/from-bash.txt', { context: ctx })
  assert((await sbx.files.read('from-bash.txt')) === 'from-bash\n', 'a file bash wrote')
  const listed = await sbx.commands.list()
  assert(!listed.some((p) => /bash --noprofile/.test(p.cmd)), JSON.stringify(listed))
  // Output past what a Python execution may write ends the shell, as a limit does.
  const flood = await sbx.runCode('n=1; yes 0123456789012345678901234567890123456789 | head -c 100000000', { context: ctx })
  assert(flood.error && flood.error.name === 'OutputLimitError', JSON.stringify(flood.error))
  await sbx.restartCodeContext(ctx)
  const restarted = await sbx.runCode('echo "${n:-restarted}"', { context: ctx })
  assert(restarted.logs.stdout.join('') === 'restarted\n', JSON.stringify(restarted.logs))
  await sbx.removeCodeContext(ctx)
  await throws(() => sbx.runCode('echo', { context: ctx }), /not found/i, 'a removed bash context')
})

await check('a javascript context: values, declarations kept, errors, await, require', async () => {
  const ctx = await sbx.createCodeContext({ language: 'js' })
  assert(ctx.language === 'javascript', JSON.stringify(ctx))
  const first = await sbx.runCode("const base = 20\nconsole.log('logged')\nbase + 1", { context: ctx })
  assert(first.text === '21' && first.logs.stdout.join('') === 'logged\n', `${first.text} ${JSON.stringify(first.logs)}`)
  const kept = await sbx.runCode('base * 2', { context: ctx })
  assert(kept.text === '40', `text ${kept.text} ${JSON.stringify(kept.error)}`)
  const text = await sbx.runCode("'plain ' + 'text'", { context: ctx })
  assert(text.text === 'plain text', `text ${text.text}`)
  const awaited = await sbx.runCode('await new Promise((r) => setTimeout(() => r(7), 50))', { context: ctx })
  assert(awaited.text === '7', `awaited ${awaited.text} ${JSON.stringify(awaited.error)}`)
  const lastLine = await sbx.runCode('const t = await Promise.resolve(base)\nt + 2 // a comment', { context: ctx })
  assert(lastLine.text === '22', `last line ${lastLine.text} ${JSON.stringify(lastLine.error)}`)
  const thrown = await sbx.runCode("null.x", { context: ctx })
  assert(thrown.error && thrown.error.name === 'TypeError' && /null/.test(thrown.error.value), JSON.stringify(thrown.error))
  const fs = await sbx.runCode("require('fs').readFileSync('/home/user/from-bash.txt', 'utf8').trim()", { context: ctx })
  assert(fs.text === 'from-bash', `text ${fs.text} ${JSON.stringify(fs.error)}`)
  const byLanguage = await sbx.runCode('typeof base', { language: 'javascript' })
  assert(byLanguage.text === 'undefined', `the javascript default context saw base: ${byLanguage.text}`)
  const contexts = await sbx.listCodeContexts()
  assert(contexts.some((c) => c.id === ctx.id && c.language === 'javascript'), JSON.stringify(contexts))
  await sbx.removeCodeContext(ctx)
})

await check('two contexts: separate globals, shared files', async () => {
  const ctx = await sbx.createCodeContext()
  assert(ctx.id && ctx.language === 'python', JSON.stringify(ctx))
  await sbx.runCode("y = 'in ctx'\nopen('shared.txt', 'w').write('from ctx')", { context: ctx })
  const inCtx = await sbx.runCode('y', { context: ctx })
  assert(inCtx.text === 'in ctx', `text ${inCtx.text}`)  // E2B gives a str's text, not its repr
  const inDefault = await sbx.runCode('y')
  assert(inDefault.error && inDefault.error.name === 'NameError', JSON.stringify(inDefault.error))
  const shared = await sbx.runCode("open('shared.txt').read()")
  assert(shared.text === 'from ctx', `text ${shared.text}`)
  // A kernel of its own: its process, environment and modules; its crash is its own.
  const mine = await sbx.runCode("import os, json\nos.environ['ONLY_CTX'] = '1'\njson.dumps = len\nos.getpid()", { context: ctx })
  const kernel = await sbx.runCode(`import os, json\nos.getpid() != ${mine.text}, os.environ.get('ONLY_CTX'), json.dumps([1])`)
  assert(kernel.text === "(True, None, '[1]')", `the default context saw the other's: ${kernel.text} ${mine.text}`)
  const crashed = await sbx.runCode("import os\nos._exit(9)", { context: ctx })
  assert(crashed.error && crashed.error.name === 'KernelEnded' && /status 9/.test(crashed.error.value),
    JSON.stringify(crashed.error))
  const after = await sbx.runCode("'y' in globals()", { context: ctx })
  assert(after.text === 'False', `a crashed context starts anew: ${after.text}`)
  const contexts = await sbx.listCodeContexts()
  assert(contexts.some((c) => c.id === ctx.id), JSON.stringify(contexts))
  await sbx.restartCodeContext(ctx)
  const restarted = await sbx.runCode('y', { context: ctx })
  assert(restarted.error && restarted.error.name === 'NameError', JSON.stringify(restarted.error))
  const x = await sbx.runCode('x')
  assert(x.text === '41', `the default context kept x: ${x.text}`)
  await sbx.removeCodeContext(ctx)
  await throws(() => sbx.runCode('1', { context: ctx }), /not found/i, 'a removed context')
})

await check('file metadata: kept on write, given by getInfo and list, moved and removed with the file', async () => {
  const info = await sbx.files.write('meta.txt', 'm', { metadata: { author: 'me', rev: '2' } })
  assert(info.metadata && info.metadata.author === 'me' && info.metadata.rev === '2', JSON.stringify(info))
  const stat = await sbx.files.getInfo('meta.txt')
  assert(stat.metadata && stat.metadata.author === 'me' && stat.metadata.rev === '2', JSON.stringify(stat))
  const listed = await sbx.files.list('/home/user')
  const entry = listed.find((f) => f.name === 'meta.txt')
  assert(entry && entry.metadata && entry.metadata.rev === '2', JSON.stringify(entry))
  assert(listed.filter((f) => f.metadata).length === 1, 'other files have none')
  await sbx.files.rename('meta.txt', 'moved-meta.txt')
  assert((await sbx.files.getInfo('moved-meta.txt')).metadata?.author === 'me', 'moved with the file')
  await sbx.files.write('moved-meta.txt', 'again')
  assert((await sbx.files.getInfo('moved-meta.txt')).metadata === undefined, 'a write without metadata clears it')
  await sbx.files.write('/tmp/meta-out.txt', 'x', { metadata: { where: 'tmp' } })
  assert((await sbx.files.getInfo('/tmp/meta-out.txt')).metadata?.where === 'tmp', 'outside the home')
  await sbx.files.remove('/tmp/meta-out.txt')
  await sbx.files.write('/tmp/meta-out.txt', 'y')
  assert((await sbx.files.getInfo('/tmp/meta-out.txt')).metadata === undefined, 'removed with the file')
  await sbx.files.remove('moved-meta.txt')
  await throws(() => sbx.files.write('bad.txt', 'x', { metadata: { 'a b': 'c' } }), /metadata key/i, 'a key the SDK refuses')
})

await check('files: write, read, list, and code sees them', async () => {
  await sbx.files.write('/home/user/data.csv', 'a,b\n1,2\n')
  const e = await sbx.runCode("import pandas as pd\nint(pd.read_csv('data.csv')['b'][0])")
  assert(e.text === '2', `text ${e.text} ${JSON.stringify(e.error)}`)
  await sbx.runCode("open('made.txt', 'w').write('made by code')")
  assert((await sbx.files.read('made.txt')) === 'made by code', 'read back')
  assert((await sbx.files.read('/home/user/data.csv')) === 'a,b\n1,2\n', 'read written')
  const entries = await sbx.files.list('/home/user')
  const csv = entries.find((f) => f.name === 'data.csv')
  assert(csv && csv.type === 'file' && Number(csv.size) === 8, JSON.stringify(entries).slice(0, 400))
  assert(await sbx.files.exists('data.csv'), 'exists')
  assert(!(await sbx.files.exists('missing.csv')), 'a missing file exists')
  await sbx.files.makeDir('/home/user/sub')
  await sbx.files.write('sub/inner.txt', 'inner')
  await sbx.files.rename('sub/inner.txt', 'sub/moved.txt')
  assert((await sbx.files.read('sub/moved.txt')) === 'inner', 'moved')
  await sbx.files.remove('sub')
  assert(!(await sbx.files.exists('sub')), 'removed')
  await throws(() => sbx.files.read('nope.txt'), /not found|no such/i, 'reading a missing file')
})

await check('files at any path: git in /tmp through commands and files, /opt and /data written, /etc read, the system refused', async () => {
  const init = await sbx.commands.run(
    'git init -q /tmp/repo && cd /tmp/repo && git config user.email a@example.com && git config user.name A')
  assert(init.exitCode === 0, `git init: ${init.stderr}`)
  const written = await sbx.files.write('/tmp/repo/README.md', '# hello\n')
  assert(written.path === '/tmp/repo/README.md', `write answered ${JSON.stringify(written)}`)
  const commit = await sbx.commands.run('cd /tmp/repo && git add README.md && git commit -qm first && git log --format=%s')
  assert(commit.stdout === 'first\n', `git commit: ${commit.stdout} ${commit.stderr}`)
  await sbx.commands.run('echo more >> /tmp/repo/README.md')
  const readme = await sbx.files.read('/tmp/repo/README.md')
  assert(readme === '# hello\nmore\n', `read what a command wrote: ${JSON.stringify(readme).slice(0, 200)}`)
  const listed = await sbx.files.list('/tmp/repo')
  assert(listed.some((e) => e.path === '/tmp/repo/README.md'), JSON.stringify(listed).slice(0, 400))
  await sbx.files.write('/tmp/deep/er/x.bin', new Uint8Array([0, 255, 10, 13]).buffer)
  const bytes = await sbx.files.read('/tmp/deep/er/x.bin', { format: 'bytes' })
  assert(Buffer.from(bytes).equals(Buffer.from([0, 255, 10, 13])), `bytes ${Buffer.from(bytes).toString('hex')}`)
  // The sandbox's own passwd, where the home's user is.
  assert(/^user:x:1000:/m.test(await sbx.files.read('/etc/passwd')), 'the sandbox passwd')
  // The root is the sandbox's own, writable where its user owns it; the host's /usr is not.
  await sbx.files.write('/opt/app/settings.json', '{"a": 1}')
  const opt = await sbx.commands.run('cat /opt/app/settings.json && mkdir -p /data && echo d > /data/f && cat /data/f')
  assert(opt.stdout === '{"a": 1}d\n', `/opt and /data: ${opt.stdout} ${opt.stderr}`)
  assert((await sbx.files.read('/data/f')) === 'd\n', 'read what a command wrote in /data')
  await throws(() => sbx.files.write('/usr/evil', 'x'), /read-only|permission/i, 'writing the read-only system')
  await throws(() => sbx.files.read('/tmp/nope'), /not found|no such/i, 'a missing file outside the home')
  await throws(() => sbx.files.read('/tmp'), /directory/i, 'a directory outside the home')
})

await check('a directory watch sees files made by code and commands, streamed and polled', async () => {
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
  const until = async (what) => {
    for (let i = 0; i < 100 && !what(); i++) await sleep(100)
  }
  await sbx.files.makeDir('/home/user/watched')
  const seen = []
  const has = (name, type) => seen.some((e) => e.name === name && e.type === type)
  const handle = await sbx.files.watchDir('/home/user/watched', (e) => seen.push(e), { recursive: true })
  // The watch is a process of the sandbox's, but not a command of the client's.
  const running = await sbx.commands.list()
  assert(!running.some((p) => p.tag === 'execbox:watch-dir'), `listed: ${JSON.stringify(running)}`)
  await sbx.runCode("open('/home/user/watched/by-code.txt', 'w').write('x')")
  await sbx.commands.run('mkdir /home/user/watched/sub')
  await until(() => has('sub', 'create'))
  await sbx.commands.run('touch /home/user/watched/sub/deep.txt && rm /home/user/watched/by-code.txt')
  await until(() => has('sub/deep.txt', 'create') && has('by-code.txt', 'remove'))
  await handle.stop()
  const all = JSON.stringify(seen)
  assert(has('by-code.txt', 'create') && has('by-code.txt', 'write'), `code's file: ${all}`)
  assert(has('sub', 'create') && has('sub/deep.txt', 'create'), `a subdirectory's file: ${all}`)
  assert(has('by-code.txt', 'remove'), `a removal: ${all}`)
  await throws(() => sbx.files.watchDir('/home/user/nope', () => {}), /not found|no such/i, 'a missing directory')

  // The polled form (E2B's Python SDK's), on the wire.
  const base = process.env.E2B_SANDBOX_URL
  const rpc = async (method, body) => {
    const res = await fetch(`${base}/filesystem.Filesystem/${method}`, {
      method: 'POST',
      headers: {
        'E2b-Sandbox-Id': sbx.sandboxId,
        'E2b-Sandbox-Port': '49983',
        'X-Access-Token': sbx.envdAccessToken,
        'Content-Type': 'application/json',
        'Connect-Protocol-Version': '1',
      },
      body: JSON.stringify(body),
    })
    return { status: res.status, body: await res.json() }
  }
  const created = await rpc('CreateWatcher', { path: '/tmp' })
  assert(created.status === 200 && created.body.watcherId, JSON.stringify(created))
  await sbx.commands.run('echo hi > /tmp/polled.txt')
  let events = []
  for (let i = 0; i < 50 && !events.some((e) => e.name === 'polled.txt'); i++) {
    const got = await rpc('GetWatcherEvents', { watcherId: created.body.watcherId })
    assert(got.status === 200, JSON.stringify(got))
    events = events.concat(got.body.events)
    await sleep(100)
  }
  assert(events.some((e) => e.name === 'polled.txt' && e.type === 'EVENT_TYPE_CREATE'), JSON.stringify(events))
  assert((await rpc('RemoveWatcher', { watcherId: created.body.watcherId })).status === 200, 'removed')
  const gone = await rpc('GetWatcherEvents', { watcherId: created.body.watcherId })
  assert(gone.status === 404 && gone.body.code === 'not_found', JSON.stringify(gone))
  const missing = await rpc('CreateWatcher', { path: '/tmp/nope' })
  assert(missing.status === 404, JSON.stringify(missing))
})

await check('signed file URLs work without headers; another operation, path or an expired one is refused', async () => {
  await sbx.files.write('signed.txt', 'signed')
  const down = await sbx.downloadUrl('signed.txt')
  assert(new URL(down).searchParams.get('signature').startsWith('v1_'), `signed: ${down}`)
  let res = await fetch(down)
  assert(res.status === 200 && (await res.text()) === 'signed', `download: ${res.status}`)
  const form = () => {
    const f = new FormData()
    f.append('file', new Blob(['up']), 'uploaded.txt')
    return f
  }
  res = await fetch(await sbx.uploadUrl('uploaded.txt'), { method: 'POST', body: form() })
  assert(res.ok, `upload: ${res.status} ${await res.text()}`)
  assert((await sbx.files.read('uploaded.txt')) === 'up', 'the uploaded file')
  res = await fetch(down, { method: 'POST', body: form() })
  assert(res.status === 401, `a read URL used to write: ${res.status}`)
  res = await fetch(down.replace('signed.txt', 'uploaded.txt'))
  assert(res.status === 401, `another path: ${res.status}`)
  const soon = await sbx.downloadUrl('signed.txt', { useSignatureExpiration: 1 })
  res = await fetch(soon)
  assert(res.status === 200, `before its expiry: ${res.status}`)
  await new Promise((r) => setTimeout(r, 2500))
  res = await fetch(soon)
  assert(res.status === 401 && /expired/.test(await res.text()), `after its expiry: ${res.status}`)
  // An expiration that is not a time, though signed with the sandbox's token, is refused as such.
  const { createHash } = await import('node:crypto')
  const u = new URL(down)
  const [p, user] = [u.searchParams.get('path'), u.searchParams.get('username') ?? '']
  const signed = createHash('sha256').update(`${p}:read:${user}:${sbx.envdAccessToken}:12x`).digest('base64')
  u.searchParams.set('signature', 'v1_' + signed.replace(/=+$/, ''))
  u.searchParams.set('signature_expiration', '12x')
  res = await fetch(u)
  assert(res.status === 401 && /not a time/.test(await res.text()), `an expiration not a time: ${res.status}`)
})

await check('gzip: uploads and downloads compressed, in the home and outside it', async () => {
  const text = 'a line of text\n'.repeat(4000)
  await sbx.files.write('/home/user/z.txt', text, { gzip: true })
  await sbx.files.write('/tmp/z.txt', text, { gzip: true })
  assert((await sbx.files.read('z.txt', { gzip: true })) === text, 'read z.txt')
  assert((await sbx.files.read('/tmp/z.txt', { gzip: true })) === text, 'read /tmp/z.txt')
  const inside = await sbx.runCode("len(open('/home/user/z.txt').read()), open('/tmp/z.txt').read() == open('z.txt').read()")
  assert(inside.text === `(${text.length}, True)`, `inside: ${inside.text} ${JSON.stringify(inside.error)}`)
  // On the wire, as a client without the SDK sees it.
  const { gzipSync } = await import('node:zlib')
  const base = process.env.E2B_SANDBOX_URL
  const headers = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': sbx.envdAccessToken }
  for (const path of ['z.txt', '/tmp/z.txt']) {
    const res = await fetch(`${base}/files?path=${encodeURIComponent(path)}`, { headers: { ...headers, 'Accept-Encoding': 'gzip' } })
    assert(res.status === 200 && res.headers.get('content-encoding') === 'gzip', `${path}: ${res.status} ${res.headers.get('content-encoding')}`)
    assert((await res.text()) === text, `${path}: the content`)
  }
  const upload = (path, body) =>
    fetch(`${base}/files?path=${path}`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip' },
      body,
    })
  let r = await upload('/tmp/raw.txt', gzipSync('raw'))
  assert(r.status === 200, `a gzip upload: ${r.status} ${await r.text()}`)
  assert((await sbx.files.read('/tmp/raw.txt')) === 'raw', 'raw read back')
  r = await upload('bomb.txt', gzipSync(Buffer.alloc(200 << 20)))
  assert(r.status === 413 && /inflates to more than/.test(await r.text()), `a bomb: ${r.status}`)
  r = await upload('junk.txt', Buffer.from('not gzip'))
  assert(r.status === 400 && /gzip/.test(await r.text()), `not gzip: ${r.status}`)
  assert(!(await sbx.files.exists('bomb.txt')) && !(await sbx.files.exists('junk.txt')), 'nothing written')
  // A NUL or a control character in a path is the client's mistake, in the home and out of it.
  for (const path of ['/tmp/a%00b', 'a%00b', '/tmp/a%0Ab']) {
    const res = await fetch(`${base}/files?path=${path}`, { headers })
    assert(res.status === 400 && /control character/.test(await res.text()), `read ${path}: ${res.status}`)
    r = await upload(path, gzipSync('x'))
    assert(r.status === 400, `write ${path}: ${r.status}`)
  }
})

await check("E2B's user: 'user' is the sandbox's user; 'root' is refused, saying why", async () => {
  const asUser = await sbx.commands.run('id -un', { user: 'user' })
  assert(asUser.stdout === 'user\n', `as user: ${asUser.stdout}`)
  await sbx.files.write('/home/user/by-user.txt', 'u', { user: 'user' })
  assert((await sbx.files.read('by-user.txt', { user: 'user' })) === 'u', 'files as user')
  await throws(() => sbx.commands.run('id -un', { user: 'root' }), /root/, 'a command as root')
  await throws(() => sbx.files.write('/opt/as-root.txt', 'r', { user: 'root' }), /root/, 'a write as root')
  await throws(() => sbx.files.read('by-user.txt', { user: 'root' }), /root/, 'a read as root')
  assert(!(await sbx.files.exists('/opt/as-root.txt')), 'nothing written as root')
})

await check('the home is /home/user, owned by user, and /work and ~ name it', async () => {
  const written = await sbx.files.write('/home/user/a.txt', 'home')
  assert(written.path === '/home/user/a.txt', `write answered ${JSON.stringify(written)}`)
  const entries = await sbx.files.list('/home/user')
  const a = entries.find((f) => f.name === 'a.txt')
  assert(a && a.path === '/home/user/a.txt' && a.type === 'file', JSON.stringify(entries).slice(0, 400))
  assert(a.owner === 'user' && a.group === 'user', `owner ${a.owner}, group ${a.group}`)
  const info = await sbx.files.getInfo('~/a.txt')
  assert(info.path === '/home/user/a.txt' && info.owner === 'user', JSON.stringify(info))
  // The alias, both ways: written by one name, read by the other, inside and through the SDK.
  const viaWork = await sbx.files.write('/work/w.txt', 'work')
  assert(viaWork.path === '/home/user/w.txt', `write answered ${JSON.stringify(viaWork)}`)
  assert((await sbx.files.read('/home/user/w.txt')) === 'work', 'read /work/w.txt as /home/user/w.txt')
  assert((await sbx.files.read('/work/a.txt')) === 'home', 'read /home/user/a.txt as /work/a.txt')
  const listedByAlias = await sbx.files.list('/work')
  assert(listedByAlias.some((f) => f.path === '/home/user/w.txt'), JSON.stringify(listedByAlias).slice(0, 400))
  const inside = await sbx.runCode("import os\nopen('/work/a.txt').read(), open('/home/user/w.txt').read(), os.getcwd()")
  assert(inside.text === "('home', 'work', '/home/user')", `text ${inside.text} ${JSON.stringify(inside.error)}`)
  const made = await sbx.files.makeDir('/work/made')
  const dir = await sbx.files.getInfo('made')
  assert(dir.path === '/home/user/made' && dir.type === 'dir', `${made} ${JSON.stringify(dir)}`)
  // A command starts at home too.
  const pwd = await sbx.commands.run('pwd')
  assert(pwd.stdout === '/home/user\n', JSON.stringify(pwd.stdout))
  const bash = await sbx.commands.run('bash -c pwd; echo "$HOME"; id -un')
  assert(bash.stdout === '/home/user\n/home/user\nuser\n', JSON.stringify(bash.stdout))
  await sbx.files.remove('made')
})

await check('hostile paths reach nothing outside the work dir', async () => {
  await throws(() => sbx.files.write('../escape.txt', 'x'), /\.\.|invalid|path/i, 'writing ../escape.txt')
  await throws(() => sbx.files.read('/home/user/../../etc/passwd'), /\.\.|invalid|path/i, 'reading through ..')
  // A link the code planted is not followed by the host.
  await sbx.runCode("import os\nos.symlink('/etc/passwd', 'link')")
  await throws(() => sbx.files.read('link'), /not found|symbolic|link/i, 'reading a planted link')
  await sbx.files.write('link', 'replaced')  // replaces the link, never writes through it
  assert((await sbx.runCode("open('/etc/passwd').read().startswith('root')")).text === 'True', '/etc/passwd intact')
  assert((await sbx.runCode("os.path.islink('link')")).text === 'False', 'the link was replaced')
})

await check("commands.run('ls -la')", async () => {
  const streamed = []
  const r = await sbx.commands.run('ls -la', { onStdout: (d) => streamed.push(d) })
  assert(r.exitCode === 0, `exit ${r.exitCode}`)
  assert(r.stdout.includes('data.csv'), `stdout ${r.stdout}`)
  assert(streamed.join('').includes('data.csv'), 'streamed')
})

await check('a failing command: exit code and stderr', async () => {
  const e = await throws(() => sbx.commands.run('echo out; echo err >&2; exit 3'), /exit/i, 'exit 3')
  assert(e.exitCode === 3, `exitCode ${e.exitCode}`)
  assert(e.stderr === 'err\n' && e.stdout === 'out\n', `${JSON.stringify(e.stdout)} ${JSON.stringify(e.stderr)}`)
})

await check('a command sees the sandbox env, its own envs and cwd', async () => {
  const r = await sbx.commands.run('echo "$E2B_CMD_VAR" && pwd', { envs: { E2B_CMD_VAR: 'v1' }, cwd: '/tmp' })
  assert(r.stdout === 'v1\n/tmp\n', JSON.stringify(r.stdout))
})

await check('a background command runs on until killed, listed meanwhile', async () => {
  const handle = await sbx.commands.run('sleep 30', { background: true })
  assert(Number.isInteger(handle.pid) && handle.pid > 1, `pid ${handle.pid}`)
  const listed = await sbx.commands.list()
  const mine = listed.find((p) => p.pid === handle.pid)
  assert(mine && mine.cmd === '/bin/bash' && JSON.stringify(mine.args) === '["-l","-c","sleep 30"]',
    JSON.stringify(listed))
  assert((await handle.kill()) === true, 'kill answered false')
  const e = await throws(() => handle.wait(), /signal: killed/, 'wait after kill')
  assert(e.exitCode === -1, `exitCode ${e.exitCode}`)
  assert(!(await sbx.commands.list()).some((p) => p.pid === handle.pid), 'still listed after its end')
  assert((await sbx.commands.kill(handle.pid)) === false, 'a process that has ended was killed again')
  assert((await sbx.commands.kill(999_999)) === false, 'no such process, yet killed')
})

await check('stdin: sendStdin reaches a background cat, closeStdin ends it', async () => {
  const streamed = []
  const handle = await sbx.commands.run('cat', { background: true, stdin: true, onStdout: (d) => streamed.push(d) })
  await handle.sendStdin('hello\n')
  await sbx.commands.sendStdin(handle.pid, 'world\n')
  await waitFor(() => streamed.join('') === 'hello\nworld\n', `streamed ${JSON.stringify(streamed)}`)
  await handle.closeStdin()
  const r = await handle.wait()
  assert(r.exitCode === 0 && r.stdout === 'hello\nworld\n', JSON.stringify(r))
  // Without stdin: nothing to write to, said as such.
  const other = await sbx.commands.run('sleep 30', { background: true })
  await throws(() => other.sendStdin('x'), /stdin/i, 'stdin of a command started without it')
  await other.kill()
  // Killed while it still reads.
  const cat = await sbx.commands.run('cat', { background: true, stdin: true })
  await cat.sendStdin('partial\n')
  await waitFor(() => cat.stdout === 'partial\n', `stdout ${JSON.stringify(cat.stdout)}`)
  await cat.kill()
  const killed = await throws(() => cat.wait(), /signal: killed/, 'cat killed')
  assert(killed.stdout === 'partial\n', JSON.stringify(killed.stdout))
})

await check('StreamInput (a client stream, sent whole) writes to stdin', async () => {
  const handle = await sbx.commands.run('cat', { background: true, stdin: true })
  const envelope = (message) => {
    const body = Buffer.from(JSON.stringify(message))
    const head = Buffer.alloc(5)
    head.writeUInt32BE(body.length, 1)
    return Buffer.concat([head, body])
  }
  const b64 = (text) => Buffer.from(text).toString('base64')
  const r = await fetch(`${process.env.E2B_SANDBOX_URL}/process.Process/StreamInput`, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/connect+json',
      'E2b-Sandbox-Id': sbx.sandboxId,
      'E2b-Sandbox-Port': '49983',
      'X-Access-Token': sbx.envdAccessToken,
    },
    body: Buffer.concat([
      envelope({ start: { process: { pid: handle.pid } } }),
      envelope({ data: { input: { stdin: b64('one\n') } } }),
      envelope({ keepalive: {} }),
      envelope({ data: { input: { stdin: b64('two\n') } } }),
    ]),
  })
  const answer = Buffer.from(await r.arrayBuffer()).toString()
  assert(r.status === 200 && !/error/.test(answer), `${r.status} ${answer}`)
  await handle.closeStdin()
  const done = await handle.wait()
  assert(done.stdout === 'one\ntwo\n', JSON.stringify(done.stdout))
})

await check('a second client connects to a running command and sees its output', async () => {
  const script = 'for i in 1 2 3; do echo line$i; sleep 0.5; done; echo done >&2'
  const handle = await sbx.commands.run(script, { background: true })
  const second = await Sandbox.connect(sbx.sandboxId)
  const seen = []
  const again = await second.commands.connect(handle.pid, { onStdout: (d) => seen.push(d) })
  assert(again.pid === handle.pid, `pid ${again.pid}`)
  const r = await again.wait()
  assert(r.stdout === 'line1\nline2\nline3\n' && r.stderr === 'done\n', JSON.stringify(r))
  assert(seen.join('') === r.stdout, `streamed ${JSON.stringify(seen)}`)
  const first = await handle.wait()
  assert(first.stdout === r.stdout && first.exitCode === 0, JSON.stringify(first))
  await throws(() => second.commands.connect(999_999), /NotFound/, 'connecting to no process')
})

await check('a pty: input echoed, resize, kill', async () => {
  const chunks = []
  const term = await sbx.pty.create({ rows: 24, cols: 80, onData: (d) => chunks.push(Buffer.from(d)) })
  const text = () => Buffer.concat(chunks).toString()
  const input = (line) => sbx.pty.sendInput(term.pid, new TextEncoder().encode(line))
  // The terminal echoes the line as typed; only the shell prints the sum.
  await input('echo hi $((40 + 2))\n')
  await waitFor(() => text().includes('echo hi $((40 + 2))') && text().includes('hi 42'), `pty ${JSON.stringify(text())}`)
  assert((await sbx.commands.list()).some((p) => p.pid === term.pid), 'the pty is listed')
  await sbx.pty.resize(term.pid, { rows: 30, cols: 100 })
  await input('stty size\n')
  await waitFor(() => text().includes('30 100'), `stty size ${JSON.stringify(text().slice(-200))}`)
  assert((await sbx.pty.kill(term.pid)) === true, 'kill answered false')
  await throws(() => term.wait(), /signal: killed/, 'the pty after kill')
})

await check("a command's output comes whole, however fast it is written", async () => {
  // Some 2.7 MB, more than the 1 MiB a stream keeps for late readers: the client is a follower,
  // and the command waits for it rather than lose what it has not read.
  const expected = Array.from({ length: 400000 }, (_, i) => `${i + 1}\n`).join('')
  const r = await sbx.commands.run('seq 1 400000')
  assert(r.exitCode === 0, `exit ${r.exitCode}`)
  assert(r.stdout.length === expected.length, `${r.stdout.length} of ${expected.length} bytes`)
  assert(r.stdout === expected, 'the output in order')
  assert(!/dropped/.test(r.stderr), r.stderr.slice(0, 300))
})

await check('a foreground command still returns its output and exit code', async () => {
  const r = await sbx.commands.run('echo "$((6 * 7))"; echo warn >&2')
  assert(r.exitCode === 0 && r.stdout === '42\n' && r.stderr === 'warn\n', JSON.stringify(r))
  const e = await throws(() => sbx.commands.run('exit 7'), /exit status 7/, 'exit 7')
  assert(e.name === 'CommandExitError' && e.exitCode === 7, `${e.name} ${e.exitCode}`)
})

await check('getHost reaches a server in the sandbox with its token; a port nobody listens on is refused', async () => {
  await sbx.files.write('www/hello.txt', 'hello from inside')
  const server = await sbx.commands.run('cd www && exec python3 -m http.server 8123 --bind 127.0.0.1', { background: true })
  try {
    const host = sbx.getHost(8123)
    assert(host === `8123-${sbx.sandboxId}.execbox.test`, `host: ${host}`)
    const token = { 'E2B-Traffic-Access-Token': sbx.trafficAccessToken }
    await waitFor(async () => (await hostGet(host, '/hello.txt', token)).status === 200, 'the server answers', 30_000)
    const r = await hostGet(host, '/hello.txt?x=1', token)
    assert(r.status === 200 && r.body === 'hello from inside', `through getHost: ${r.status} ${r.body}`)
    const listing = await hostGet(host, '/', { 'X-Access-Token': sbx.envdAccessToken })
    assert(listing.status === 200 && listing.body.includes('hello.txt'), `the directory listing: ${listing.status}`)
    assert((await hostGet(host, '/missing', token)).status === 404, "the server's own 404")
    const anonymous = await hostGet(host, '/hello.txt')
    assert(anonymous.status === 404 && !anonymous.body.includes('hello from inside'), `no token: ${anonymous.status}`)
    const none = await hostGet(sbx.getHost(8124), '/', token)
    assert(none.status === 502 && /nothing listens on port 8124/.test(none.body), `port 8124: ${none.status} ${none.body}`)
    // envd by its host, as an SDK without E2B_SANDBOX_URL reaches it.
    const health = await hostGet(sbx.getHost(49983), '/health', token)
    assert(health.status === 204 || health.status === 200, `envd by host: ${health.status}`)
    assert((await sbx.commands.list()).every((p) => p.pid !== undefined && !String(p.tag).includes('relay')),
      'the relays are not listed')
  } finally {
    await server.kill()
  }
})

await check('getInfo and list', async () => {
  const info = await sbx.getInfo()
  assert(info.sandboxId === sbx.sandboxId && info.metadata.suite === 'e2b', JSON.stringify(info))
  const listed = await Sandbox.list({ query: { metadata: { label } } }).nextItems()
  assert(listed.some((s) => s.sandboxId === sbx.sandboxId), JSON.stringify(listed))
  const none = await Sandbox.list({ query: { metadata: { label: 'no-such-label' } } }).nextItems()
  assert(none.length === 0, JSON.stringify(none))
})

await check('metrics: CPU while code burns it, memory and disk of the session', async () => {
  const idle = await sbx.getMetrics()
  assert(idle.length === 1, JSON.stringify(idle))
  const m0 = idle[0]
  const info = await sbx.getInfo()
  assert(m0.cpuCount >= 1 && m0.memTotal > 0, JSON.stringify(m0))
  assert(info.memoryMB === undefined || m0.memTotal === info.memoryMB * 1024 * 1024, `${m0.memTotal} ${info.memoryMB}`)
  assert(m0.memUsed > 1024 * 1024 && m0.memUsed <= m0.memTotal, `memUsed ${m0.memUsed}`)
  assert(m0.diskTotal > 0 && m0.diskUsed > 0 && m0.diskUsed <= m0.diskTotal, JSON.stringify(m0))
  assert(m0.timestamp instanceof Date && Math.abs(m0.timestamp - Date.now()) < 60_000, `timestamp ${m0.timestamp}`)
  // Code that burns CPU for a while; samples are taken beside it. The busiest one counts: on a
  // loaded machine (the whole suite on two cores) the code gets a share of a core, not all of it,
  // and may start late (CI once saw a single sample miss).
  const burning = sbx.runCode('import time\nend = time.time() + 6\nwhile time.time() < end: pass')
  const samples = []
  for (let i = 0; i < 4; i++) {
    await new Promise((r) => setTimeout(r, 1000))
    samples.push((await sbx.getMetrics())[0].cpuUsedPct)
  }
  await burning
  assert(Math.max(...samples) > 10, `cpuUsedPct ${JSON.stringify(samples)} while code ran (idle: ${m0.cpuUsedPct})`)
  // The sample's own process is not one of the client's commands, and a window before now has none.
  assert(!(await sbx.commands.list()).some((p) => p.tag === 'execbox:metrics'), 'the sample is listed')
  const old = await sbx.getMetrics({ start: new Date(Date.now() - 3_600_000), end: new Date(Date.now() - 1_800_000) })
  assert(old.length === 0, JSON.stringify(old))
  await throws(() => Sandbox.getMetrics('no-such-sandbox'), /not found/i, 'metrics of no sandbox')
})

await check('setTimeout, and one above the maximum is refused', async () => {
  await sbx.setTimeout(240_000)
  await throws(() => sbx.setTimeout(400 * 24 * 3600 * 1000), /at most/, 'a timeout of 400 days')
})

await check('a limit above the maximum at creation is refused', async () => {
  await throws(() => Sandbox.create({ timeoutMs: 400 * 24 * 3600 * 1000 }), /at most/, 'a 400-day sandbox')
})

await check('a template execbox does not have is refused, not ignored', async () => {
  await throws(() => Sandbox.create('my-own-template'), /not available/, 'a custom template')
})

await check('an unknown sandbox is not found', async () => {
  await throws(() => Sandbox.connect('no-such-sandbox'), /not found/i, 'connect')
})

await check("another key's sandbox does not exist for it", async () => {
  await throws(() => Sandbox.connect(sbx.sandboxId, { apiKey: otherKey }), /not found/i, 'connect')
  assert((await Sandbox.kill(sbx.sandboxId, { apiKey: otherKey })) === false, 'killed by the other key')
  // The sandbox's calls without its access token reach nothing either.
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/execute`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49999' },
    body: JSON.stringify({ code: 'print(1)' }),
  })
  assert(res.status === 404, `status ${res.status}`)
  assert((await sbx.runCode('x')).text === '41', 'the sandbox is intact')
})

if (typeof sbx.fork === 'function') {
  await check('fork copies the state and the files, and the two go separate ways', async () => {
    const [copy] = await sbx.fork({ timeoutMs: 120_000 })
    assert(!(copy instanceof Error), `fork failed: ${copy}`)
    assert(copy.sandboxId !== sbx.sandboxId, 'a new id')
    assert((await copy.runCode('x')).text === '41', 'x in the copy')
    assert((await copy.files.read('data.csv')) === 'a,b\n1,2\n', 'a file in the copy')
    await copy.runCode('x = 0')
    assert((await sbx.runCode('x')).text === '41', 'the original kept x')
    await copy.kill()
  })
}

await check('pause keeps the state and ends the processes; list and getInfo say paused; connect resumes it', async () => {
  const meta = { suite: 'e2b-pause', label }
  const p = await Sandbox.create({ timeoutMs: 120_000, metadata: meta })
  try {
    await p.runCode('y = 7\nimport os\nos.makedirs("d", exist_ok=True)')
    await p.files.write('d/kept.txt', 'kept')
    await p.commands.run('echo started > bg.txt; sleep 300; echo late >> bg.txt', { background: true })
    await waitFor(async () => (await p.files.exists('bg.txt')), 'the background process wrote its file')
    const shell = await p.createCodeContext({ language: 'bash', cwd: '/tmp' })
    await p.runCode('v=before', { context: shell })
    assert((await p.pause()) === true, 'pause says it paused')
    assert((await p.pause()) === false, 'a second pause says it was paused already')
    assert((await Sandbox.getInfo(p.sandboxId)).state === 'paused', 'getInfo while paused')
    const paused = await Sandbox.list({ query: { state: ['paused'], metadata: meta } }).nextItems()
    assert(paused.length === 1 && paused[0].sandboxId === p.sandboxId && paused[0].state === 'paused',
      `the paused list: ${JSON.stringify(paused)}`)
    const running = await Sandbox.list({ query: { state: ['running'], metadata: meta } }).nextItems()
    assert(running.length === 0, `the running list: ${JSON.stringify(running)}`)
    const back = await Sandbox.connect(p.sandboxId)
    assert((await Sandbox.getInfo(p.sandboxId)).state === 'running', 'getInfo after connect')
    assert((await back.runCode('y')).text === '7', 'a variable came back')
    assert((await back.files.read('d/kept.txt')) === 'kept', 'a file came back')
    assert((await back.files.read('bg.txt')) === 'started\n', "the background process's file came back")
    assert((await back.commands.list()).length === 0, 'the processes ended with the pause')
    // The bash context is kept, its shell is new (its pid may be another process's now).
    const shellAfter = await back.runCode('echo "${v:-new}" $(pwd)', { context: shell })
    assert(shellAfter.logs.stdout.join('') === 'new /tmp\n', JSON.stringify(shellAfter.logs))
  } finally {
    await Sandbox.kill(p.sandboxId)
  }
})

await check("a sandbox made to pause at its timeout (onTimeout 'pause') is paused then; connect resumes it", async () => {
  const a = await Sandbox.create({ timeoutMs: 1000, lifecycle: { onTimeout: 'pause' } })
  try {
    // Even if it paused already, the code resumes it (and it pauses again at its next timeout).
    await a.runCode('z = 11')
    await waitFor(async () => (await Sandbox.getInfo(a.sandboxId)).state === 'paused', 'paused at its timeout', 30_000)
    const back = await Sandbox.connect(a.sandboxId, { timeoutMs: 60_000 })
    assert((await Sandbox.getInfo(a.sandboxId)).state === 'running', 'running after connect')
    assert((await back.runCode('z')).text === '11', 'z came back')
  } finally {
    await Sandbox.kill(a.sandboxId)
  }
})

if (typeof Sandbox.createSnapshot === 'function') {
  await check('a snapshot is kept by name and listed; sandboxes are made from it after its own ended; delete', async () => {
    const name = `snap-${label}`
    const src = await Sandbox.create({ timeoutMs: 120_000 })
    const made = []
    try {
      await src.runCode('w = 99')
      await src.files.write('snap.txt', 'in the snapshot')
      const snap = await src.createSnapshot({ name })
      assert(snap.snapshotId.startsWith('snap_') && JSON.stringify(snap.names) === JSON.stringify([name]),
        `the snapshot: ${JSON.stringify(snap)}`)
      await src.runCode('w = 0')
      const mine = await src.listSnapshots().nextItems()
      assert(mine.length === 1 && mine[0].snapshotId === snap.snapshotId, `this sandbox's: ${JSON.stringify(mine)}`)
      const byName = await Sandbox.listSnapshots({ name }).nextItems()
      assert(byName.length === 1 && byName[0].snapshotId === snap.snapshotId, `by name: ${JSON.stringify(byName)}`)
      assert((await Sandbox.listSnapshots({ apiKey: otherKey }).nextItems()).length === 0, "another key's list")
      assert((await Sandbox.deleteSnapshot(snap.snapshotId, { apiKey: otherKey })) === false, 'deleted by another key')
      await src.kill()
      made.push(await Sandbox.create(snap.snapshotId, { timeoutMs: 120_000 }))
      made.push(await Sandbox.create(name, { timeoutMs: 120_000 }))
      for (const m of made) {
        assert((await m.runCode('w')).text === '99', 'w came from the snapshot')
        assert((await m.files.read('snap.txt')) === 'in the snapshot', 'the file came from the snapshot')
      }
      await made[0].runCode('w = 1')
      assert((await made[1].runCode('w')).text === '99', 'the two are separate')
      assert((await Sandbox.deleteSnapshot(snap.snapshotId)) === true, 'deleted')
      assert((await Sandbox.deleteSnapshot(snap.snapshotId)) === false, 'deleted twice')
      await throws(() => Sandbox.create(snap.snapshotId), /not available/, 'a deleted snapshot')
      assert((await made[0].runCode('w')).text === '1', 'its sandboxes outlive it')
    } finally {
      for (const m of made) await m.kill()
      await Sandbox.kill(src.sandboxId)
    }
  })
}

await check('malformed requests get clear errors and the sandbox serves on', async () => {
  const base = process.env.E2B_SANDBOX_URL
  const headers = (port) => ({
    'E2b-Sandbox-Id': sbx.sandboxId,
    'E2b-Sandbox-Port': port,
    'X-Access-Token': sbx.envdAccessToken,
  })
  const post = (path, port, body, type) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { ...headers(port), 'Content-Type': type }, body })
  let r = await post('/execute', '49999', '{"code": ', 'application/json')
  assert(r.status === 400 && /JSON object/.test(await r.text()), `bad JSON: ${r.status}`)
  r = await post('/execute', '49999', '{"code": 5}', 'application/json')
  assert(r.status === 400 && /code must be a string/.test(await r.text()), `code not a string: ${r.status}`)
  // Invalid UTF-8 in the code: replaced, run, answered.
  r = await post('/execute', '49999', Buffer.from('{"code": "print(\'\xff\')"}', 'latin1'), 'application/json')
  assert(r.status === 200 || r.status === 400, `invalid UTF-8: ${r.status}`)
  await r.text()
  // A Connect envelope that claims more than it holds, and one that is not JSON.
  r = await post('/process.Process/Start', '49983', Buffer.from([0, 0x7f, 0, 0, 0, 0x7b]), 'application/connect+json')
  assert(/cut short|invalid_argument/.test(Buffer.from(await r.arrayBuffer()).toString()), 'cut envelope')
  r = await post('/process.Process/Start', '49983', Buffer.from([0, 0, 0, 0, 3, 0x61, 0x62, 0x63]), 'application/connect+json')
  assert(/StartRequest|invalid_argument/.test(Buffer.from(await r.arrayBuffer()).toString()), 'junk envelope')
  // A multipart part naming a path out of the work dir, and one with no boundary.
  const form = '--B\r\nContent-Disposition: form-data; name="file"; filename="../../etc/evil"\r\n\r\nx\r\n--B--\r\n'
  r = await post('/files', '49983', form, 'multipart/form-data; boundary=B')
  assert(r.status === 400, `a part named ../../etc/evil: ${r.status}`)
  r = await post('/files', '49983', form, 'multipart/form-data')
  assert(r.status === 400 && /boundary/.test(await r.text()), `no boundary: ${r.status}`)
  r = await post('/filesystem.Filesystem/ListDir', '49983', '[1]', 'application/json')
  assert(r.status === 400, `a ListDir body that is not an object: ${r.status}`)
  // The control plane: an autoPause that is not a boolean makes no sandbox.
  r = await fetch(`${process.env.E2B_API_URL}/sandboxes`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': process.env.E2B_API_KEY },
    body: JSON.stringify({ templateID: 'base', autoPause: 'yes' }),
  })
  assert(r.status === 400 && /autoPause must be a boolean/.test(await r.text()), `autoPause 'yes': ${r.status}`)
  assert((await sbx.runCode('x')).text === '41', 'the sandbox is intact')
})

await check('connect gives the same sandbox', async () => {
  const again = await Sandbox.connect(sbx.sandboxId)
  assert((await again.runCode('x')).text === '41', 'state through a connected handle')
})

if (plainKey) {
  await check('a key not shaped e2b_<hex> works too', async () => {
    const other = await Sandbox.create({ apiKey: plainKey })
    assert((await other.runCode('6 * 7')).text === '42', 'ran')
    await other.kill()
  })
}

await check('a client-side timeout stops the execution; the sandbox serves on', async () => {
  await throws(() => sbx.runCode('import time\ntime.sleep(60)', { timeoutMs: 1500 }), /timed out|timeout/i, 'a sleep')
  const after = await sbx.runCode('print("after")')
  assert(after.logs.stdout.join('') === 'after\n', JSON.stringify(after.logs))
})

await check('a run on a sandbox killed mid-execution rejects, saying so', async () => {
  const doomed = await Sandbox.create()
  const execution = doomed.runCode('import time; time.sleep(300)', { timeoutMs: 300_000 })
  const outcome = execution.then(() => 'resolved', (e) => e)
  await new Promise((r) => setTimeout(r, 2000))
  await doomed.kill()
  const error = await outcome
  assert(error !== 'resolved', 'the run resolved')
  assert(error.name === 'TimeoutError' && /killed while the request was in progress/.test(error.message),
    `${error.name}: ${error.message}`)
})

await check('a sandbox ends at its timeout', async () => {
  const short = await Sandbox.create({ timeoutMs: 1000 })
  assert((await short.runCode('1 + 1')).text === '2', 'ran')
  // The sessions' sweep looks every few seconds.
  let running = true
  for (let i = 0; i < 60 && running; i++) {
    await new Promise((r) => setTimeout(r, 500))
    running = await short.isRunning()
  }
  assert(!running, 'still running 30 s after a 1 s timeout')
  await throws(() => short.runCode('1'), /NotFound|no sandbox|ended/, 'code after the timeout')
})

// A key with max_sessions = 1 (run.sh's config): its second sandbox is refused with 429, which the
// SDK raises as RateLimitError; with the first killed, it may have one again.
const cappedKey = process.env.EXECBOX_CAPPED_KEY
if (cappedKey) {
  await check('a key past its max_sessions gets RateLimitError', async () => {
    const one = await Sandbox.create({ apiKey: cappedKey })
    try {
      await throws(() => Sandbox.create({ apiKey: cappedKey }), /RateLimit/i, 'a second sandbox')
    } finally {
      await one.kill()
    }
    const again = await Sandbox.create({ apiKey: cappedKey })
    await again.kill()
  })
}

await check('kill ends the sandbox', async () => {
  await sbx.kill()
  assert((await sbx.isRunning()) === false, 'still running')
  await throws(() => sbx.runCode('1'), /not found|timeout|killed/i, 'code after kill')
  assert((await Sandbox.kill(sbx.sandboxId)) === false, 'killed twice')
})

console.log(`${passed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
