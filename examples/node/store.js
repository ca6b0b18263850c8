#!/usr/bin/env node
// A crashmatrix store (protocol crashmatrix-store/1, docs/store-protocol.md)
// in Node.js, standard library only: System A's five stores (operations,
// states, registry, graph, locks) and System B's two (checkpoints, plans).
//
// Node 20 has no embedded database and no file lock, so the data is a
// write-ahead log of numbered transaction files in the case's directory:
// txn/1/w, txn/2/w, ... Each holds the key/value writes of one transaction.
// A process replays the files it has not seen yet before every request, so
// its in-memory map is the state after the last transaction. A write
// transaction decides against the state after transaction N, writes its
// writes to a private temporary directory, fsyncs it, and then renames the
// directory to txn/N+1: the rename fails when another process committed N+1
// first, in which case the process replays and decides again. The rename is the
// commit point: atomic (a transaction is all there or absent), exclusive
// (one winner per number, so every compare-and-set is serialised across
// processes) and durable (the directory is fsynced before the reply). A
// process killed anywhere leaves at worst a stray temporary directory, which no
// reader looks at.
//
// Usage: node store.js [--no-window] [--no-sync] [--two-transactions]
//   --no-window  do not declare the crash window before each commit (section 6)
//   --no-sync    a deliberate defect: never fsync (also hello's mutant
//                "synchronous-off"); the power-loss cases must catch it
//   --two-transactions  a deliberate defect: ops.create commits the
//                operation, then its plan in a second transaction; with
//                --no-window nothing declares the gap, and the matrix's
//                durable-step sweep must find it from the store's syncs
'use strict';

const fs = require('fs');
const path = require('path');

const PROTOCOL = 'crashmatrix-store/1';
const DECLARE_WINDOW = !process.argv.includes('--no-window');
let SYNC = !process.argv.includes('--no-sync');
const TWO_TRANSACTIONS = process.argv.includes('--two-transactions');

// ---------------------------------------------------------------- transport

const inBuf = Buffer.alloc(1 << 16);
let pending = Buffer.alloc(0);
const sleeper = new Int32Array(new SharedArrayBuffer(4));

// readLine blocks until a whole line is on stdin; null at end of file.
function readLine() {
  for (;;) {
    const nl = pending.indexOf(10);
    if (nl >= 0) {
      const line = pending.subarray(0, nl).toString('utf8');
      pending = pending.subarray(nl + 1);
      return line;
    }
    let n;
    try {
      n = fs.readSync(0, inBuf, 0, inBuf.length, null);
    } catch (e) {
      if (e.code === 'EAGAIN') { Atomics.wait(sleeper, 0, 0, 1); continue; }
      if (e.code === 'EOF') return null;
      throw e;
    }
    if (n === 0) return null;
    pending = Buffer.concat([pending, inBuf.subarray(0, n)]);
  }
}

function writeLine(obj) {
  const data = Buffer.from(JSON.stringify(obj) + '\n', 'utf8');
  let off = 0;
  while (off < data.length) {
    try {
      off += fs.writeSync(1, data, off, data.length - off);
    } catch (e) {
      if (e.code === 'EAGAIN') { Atomics.wait(sleeper, 0, 0, 1); continue; }
      throw e;
    }
  }
}

function log(msg) {
  try { fs.writeSync(2, `nodestore[${process.pid}]: ${msg}\n`); } catch (_) { /* stderr gone */ }
}

class StoreError extends Error {
  constructor(code, message, definite = true) {
    super(message);
    this.code = code;
    this.definite = definite;
  }
}

// ---------------------------------------------------------------- the log

let txnDir = null;   // <dir>/nodestore/txn
let tmpDir = null;   // <dir>/nodestore/tmp
let applied = 0;     // the last transaction number replayed into kv
const kv = new Map(); // key -> value (JSON-able); the state after txn `applied`
let tmpSeq = 0;

function openStore(dir) {
  const root = path.join(dir, 'nodestore');
  txnDir = path.join(root, 'txn');
  tmpDir = path.join(root, 'tmp');
  fs.mkdirSync(txnDir, { recursive: true });
  fs.mkdirSync(tmpDir, { recursive: true });
  fsyncDir(root);
  fsyncDir(dir);
  catchUp();
}

function fsyncDir(dir) {
  if (!SYNC) return;
  const fd = fs.openSync(dir, 'r');
  try { fs.fsyncSync(fd); } finally { fs.closeSync(fd); }
}

function applyWrites(writes) {
  for (const [k, v] of writes) {
    if (v === null) kv.delete(k); else kv.set(k, v);
  }
}

// catchUp replays every transaction committed since the last one seen.
function catchUp() {
  for (;;) {
    let text;
    try {
      text = fs.readFileSync(path.join(txnDir, String(applied + 1), 'w'), 'utf8');
    } catch (e) {
      if (e.code === 'ENOENT') return;
      throw new StoreError('unavailable', `read transaction ${applied + 1}: ${e.message}`);
    }
    let writes;
    try {
      writes = JSON.parse(text);
    } catch (e) {
      throw new StoreError('permanent', `transaction file ${path.join(txnDir, String(applied + 1), 'w')} is not JSON: ${e.message}`);
    }
    applyWrites(writes);
    applied++;
  }
}

// transact runs decide(tx) against the latest state until its writes commit.
// decide reads through tx.get/tx.scan, stages writes with tx.put/tx.del and
// returns the result; it may throw a StoreError (nothing is written). The
// request's crash window is declared once, before the first commit attempt.
function transact(req, decide) {
  let declared = false;
  for (;;) {
    catchUp();
    const staged = new Map();
    const tx = {
      get: (k) => (staged.has(k) ? staged.get(k) : (kv.has(k) ? kv.get(k) : null)),
      put: (k, v) => staged.set(k, v),
      del: (k) => staged.set(k, null),
      scan: (prefix) => {
        const out = new Map();
        for (const [k, v] of kv) if (k.startsWith(prefix)) out.set(k, v);
        for (const [k, v] of staged) {
          if (!k.startsWith(prefix)) continue;
          if (v === null) out.delete(k); else out.set(k, v);
        }
        return out;
      },
    };
    const result = decide(tx);
    // Drop writes that change nothing, so a repeated call commits nothing.
    const writes = [];
    for (const [k, v] of staged) {
      const old = kv.has(k) ? kv.get(k) : null;
      if (JSON.stringify(old) !== JSON.stringify(v)) writes.push([k, v]);
    }
    if (writes.length === 0) return result;
    if (DECLARE_WINDOW && !declared) {
      declared = true;
      const action = at(req, 'nodestore/commit');
      if (action === 'fail') throw new StoreError('injected', `injected failure before committing ${req.op}`);
    }
    if (commit(applied + 1, writes)) {
      applyWrites(writes);
      applied++;
      return result;
    }
    // Another process committed that number first: decide again.
  }
}

// commit tries to make writes transaction number n; false when n is taken.
// The transaction is a directory holding one file, built under tmp/ and
// renamed to txn/<n>: rename(2) of a directory onto an existing non-empty
// directory fails (ENOTEMPTY or EEXIST), so one process wins each number.
// (link(2) onto a new name would do too, but the lazy file system of the
// power-loss cases does not support it.)
function commit(n, writes) {
  const tmp = path.join(tmpDir, `${process.pid}-${++tmpSeq}`);
  const removeTmp = () => {
    try { fs.unlinkSync(path.join(tmp, 'w')); } catch (_) { /* absent */ }
    try { fs.rmdirSync(tmp); } catch (_) { /* absent */ }
  };
  try {
    fs.mkdirSync(tmp);
    const fd = fs.openSync(path.join(tmp, 'w'), 'w');
    try {
      fs.writeSync(fd, JSON.stringify(writes));
      if (SYNC) fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fsyncDir(tmp);
  } catch (e) {
    removeTmp();
    throw new StoreError('unavailable', `write transaction ${n}: ${e.message}`);
  }
  try {
    fs.renameSync(tmp, path.join(txnDir, String(n)));
  } catch (e) {
    removeTmp();
    if (e.code === 'EEXIST' || e.code === 'ENOTEMPTY') return false;
    // A rename that returned an error did not happen.
    throw new StoreError('unavailable', `commit transaction ${n}: ${e.message}`);
  }
  try {
    fsyncDir(txnDir);
    fsyncDir(tmpDir);
  } catch (e) {
    // The rename is done: the transaction may be durable or not.
    throw new StoreError('unavailable', `sync transaction ${n}: ${e.message}`, false);
  }
  return true;
}

// read runs a read-only function against the latest state.
function read(fn) {
  catchUp();
  return fn({
    get: (k) => (kv.has(k) ? kv.get(k) : null),
    scan: (prefix) => {
      const out = new Map();
      for (const [k, v] of kv) if (k.startsWith(prefix)) out.set(k, v);
      return out;
    },
  });
}

// ---------------------------------------------------------------- crash windows

let current = null; // the request in progress: {id, steps}

function at(req, point) {
  current.steps++;
  writeLine({ id: req.id, at: { point, step: current.steps } });
  const line = readLine();
  if (line === null) process.exit(137); // the harness is gone
  let answer;
  try { answer = JSON.parse(line); } catch (e) { log(`bad at answer ${line}`); process.exit(137); }
  if (answer.action === 'die') process.exit(137);
  if (answer.action !== 'continue' && answer.action !== 'fail') {
    log(`unknown at action ${line}`);
    process.exit(137);
  }
  return answer.action;
}

// ---------------------------------------------------------------- helpers

const SEP = '\u0000';
const key = (...parts) => parts.join(SEP);
const byteCmp = (a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
const str = (v) => (v === undefined || v === null ? '' : v);
const int = (v) => (v === undefined || v === null ? 0 : v);
const props = (p) => (p === undefined || p === null ? {} : p);

function edgeKey(e) {
  return { source: e.source, type: e.type, target: e.target, rank: int(e.rank) };
}
const edgeId = (e) => key(e.source, e.type, e.target, String(int(e.rank)));
const sameEdge = (a, b) => edgeId(a) === edgeId(b);

// ---------------------------------------------------------------- operations

const IDENTITY = ['operationId', 'space', 'documentId', 'expectedRevision', 'planFingerprint'];

function normOp(o) {
  const out = {
    operationId: o.operationId,
    space: o.space,
    documentId: o.documentId,
    expectedRevision: int(o.expectedRevision),
    planFingerprint: str(o.planFingerprint),
    stage: o.stage,
    updatedAt: int(o.updatedAt),
    failureReason: str(o.failureReason),
    attempts: int(o.attempts),
    disposition: str(o.disposition),
    supersededBy: str(o.supersededBy),
    claimHolder: str(o.claimHolder),
    claimExpiresAt: int(o.claimExpiresAt),
  };
  return out;
}

function mustOp(tx, id) {
  const rec = tx.get(key('op', id));
  if (rec === null) throw new StoreError('not_found', `operation ${id}`);
  return rec;
}

const handlers = {
  'ops.create': (req, a) => {
    const k = key('op', a.operation.operationId);
    const res = transact(req, (tx) => {
      if (tx.get(k) !== null) return { created: false };
      const op = normOp(a.operation);
      op.claimHolder = '';
      op.claimExpiresAt = 0;
      tx.put(k, { op, plan: TWO_TRANSACTIONS ? '' : a.plan }); // the record and its plan: one transaction
      return { created: true };
    });
    if (!TWO_TRANSACTIONS || !res.created) return res;
    // The defect: the plan in a second transaction.
    transact(req, (tx) => { tx.put(k, { op: tx.get(k).op, plan: a.plan }); return null; });
    return res;
  },
  'ops.get': (req, a) => read((tx) => ({ operation: mustOp(tx, a.operationId).op })),
  'ops.getPlan': (req, a) => read((tx) => {
    const rec = mustOp(tx, a.operationId);
    return { plan: str(rec.plan), fingerprint: rec.op.planFingerprint };
  }),
  'ops.cas': (req, a) => transact(req, (tx) => {
    const k = key('op', a.expected.operationId);
    const rec = mustOp(tx, a.expected.operationId);
    const stored = rec.op;
    const exp = normOp(a.expected);
    const next = normOp(a.next);
    for (const f of [...IDENTITY, 'stage', 'attempts', 'disposition']) {
      if (stored[f] !== exp[f]) return { swapped: false };
    }
    if (next.updatedAt < stored.updatedAt) {
      throw new StoreError('time_backwards', `operation ${stored.operationId}: updatedAt ${next.updatedAt} < stored ${stored.updatedAt}`);
    }
    const op = { ...stored };
    for (const f of ['stage', 'updatedAt', 'failureReason', 'attempts', 'disposition', 'supersededBy']) op[f] = next[f];
    tx.put(k, { op, plan: rec.plan });
    return { swapped: true };
  }),
  'ops.listRecoverable': (req, a) => read((tx) => {
    const ops = [...tx.scan(key('op', '')).values()].map((r) => r.op)
      .filter((o) => o.stage !== 'COMPLETED' && o.disposition === '');
    ops.sort((x, y) => (x.updatedAt - y.updatedAt) || byteCmp(x.operationId, y.operationId));
    return { operations: ops.slice(0, a.limit) };
  }),
  'ops.list': () => read((tx) => {
    const ops = [...tx.scan(key('op', '')).values()].map((r) => r.op);
    ops.sort((x, y) => byteCmp(x.operationId, y.operationId));
    return { operations: ops };
  }),
  'ops.claim': (req, a) => transact(req, (tx) => {
    const k = key('op', a.operationId);
    const rec = mustOp(tx, a.operationId);
    const o = rec.op;
    if (o.claimHolder !== '' && o.claimHolder !== a.holder && o.claimExpiresAt > a.now) return { claimed: false };
    tx.put(k, { op: { ...o, claimHolder: a.holder, claimExpiresAt: a.now + a.ttlMillis }, plan: rec.plan });
    return { claimed: true };
  }),
  'ops.releaseClaim': (req, a) => transact(req, (tx) => {
    const k = key('op', a.operationId);
    const rec = mustOp(tx, a.operationId);
    const o = rec.op;
    if (o.claimHolder === '' || o.claimHolder !== a.holder) return { released: false };
    tx.put(k, { op: { ...o, claimHolder: '', claimExpiresAt: 0 }, plan: rec.plan });
    return { released: true };
  }),

  // ------------------------------------------------------------ states
  'states.findCurrent': (req, a) => read((tx) => ({ state: tx.get(key('state', a.space, a.documentId)) })),
  'states.findByOperationId': (req, a) => read((tx) => {
    const cur = tx.get(key('state', a.space, a.documentId));
    if (cur !== null && cur.operationId === a.operationId) return { state: cur };
    let best = null;
    for (const s of tx.scan(key('ver', a.space, a.documentId, '')).values()) {
      if (s.operationId === a.operationId && (best === null || s.revision > best.revision)) best = s;
    }
    return { state: best };
  }),
  'states.cas': (req, a) => transact(req, (tx) => {
    const k = key('state', a.next.space, a.next.documentId);
    const cur = tx.get(k);
    const rev = cur === null ? 0 : cur.revision;
    if (rev !== a.expected) return { swapped: false };
    tx.put(k, a.next);
    return { swapped: true };
  }),
  'states.remove': (req, a) => transact(req, (tx) => {
    const k = key('state', a.space, a.documentId);
    const cur = tx.get(k);
    if (cur === null || cur.revision !== a.revision) return { removed: false };
    tx.del(k);
    return { removed: true };
  }),
  'states.recordVersion': (req, a) => transact(req, (tx) => {
    const s = a.state;
    const k = key('ver', s.space, s.documentId, String(s.revision).padStart(20, '0'));
    if (tx.get(k) === null) tx.put(k, s);
    return {};
  }),
  'states.versions': (req, a) => read((tx) => {
    const states = [...tx.scan(key('ver', a.space, a.documentId, '')).values()];
    states.sort((x, y) => x.revision - y.revision);
    return { states };
  }),
  'states.list': (req, a) => read((tx) => {
    const states = [...tx.scan(key('state', a.space, '')).values()];
    states.sort((x, y) => byteCmp(x.documentId, y.documentId));
    return { states };
  }),
  'states.isReferenced': (req, a) => read((tx) => {
    for (const s of tx.scan(key('state', a.space, '')).values()) {
      if (a.documentId && s.documentId === a.documentId) continue;
      if (s.status !== 'ACTIVE') continue;
      if ((s.factSources || []).some((e) => sameEdge(e, a.edge))) return { referenced: true };
    }
    return { referenced: false };
  }),

  // ------------------------------------------------------------ registry
  'registry.findMatches': (req, a) => read((tx) => {
    const ids = new Set();
    for (const name of a.names || []) {
      const id = tx.get(key('bind', a.space, a.typeKey, name));
      if (id !== null) ids.add(id);
    }
    const entities = [...ids].sort(byteCmp).map((id) => tx.get(key('ent', a.space, id))).filter((e) => e !== null);
    return { entities };
  }),
  'registry.saveAll': (req, a) => transact(req, (tx) => {
    const batch = new Map(); // bind key -> nodeId, within this batch
    for (const r of a.registrations || []) {
      for (const name of r.names || []) {
        const bk = key('bind', a.space, r.typeKey, name);
        const bound = batch.has(bk) ? batch.get(bk) : tx.get(bk);
        if (bound !== null && bound !== r.nodeId) {
          throw new StoreError('registry_conflict', `space ${a.space} type ${r.typeKey} name ${JSON.stringify(name)} is bound to ${bound}, not ${r.nodeId}`);
        }
        batch.set(bk, r.nodeId);
      }
    }
    for (const r of a.registrations || []) {
      for (const name of r.names || []) tx.put(key('bind', a.space, r.typeKey, name), r.nodeId);
      const ek = key('ent', a.space, r.nodeId);
      const old = tx.get(ek);
      const ent = old === null
        ? { space: a.space, nodeId: r.nodeId, type: r.type, canonicalName: r.canonicalName, names: [], properties: {} }
        : { ...old, names: [...old.names], properties: { ...old.properties } };
      ent.names = [...new Set([...ent.names, ...(r.names || [])])].sort(byteCmp);
      Object.assign(ent.properties, props(r.properties));
      tx.put(ek, ent);
    }
    return {};
  }),
  'registry.list': (req, a) => read((tx) => {
    const entities = [...tx.scan(key('ent', a.space, '')).values()];
    entities.sort((x, y) => byteCmp(x.nodeId, y.nodeId));
    return { entities };
  }),

  // ------------------------------------------------------------ graph
  'graph.apply': (req, a) => transact(req, (tx) => {
    const m = a.mutation || {};
    const sp = a.space;
    for (const id of m.deleteNodes || []) {
      tx.del(key('node', sp, id));
      for (const [k, e] of tx.scan(key('edge', sp, ''))) {
        if (e.key.source === id || e.key.target === id) tx.del(k);
      }
    }
    for (const e of m.deleteEdges || []) tx.del(key('edge', sp, edgeId(e)));
    for (const n of m.upsertNodes || []) {
      const k = key('node', sp, n.id);
      const old = tx.get(k);
      if (old === null) tx.put(k, { id: n.id, label: n.label, properties: { ...props(n.properties) } });
      else tx.put(k, { ...old, properties: { ...old.properties, ...props(n.properties) } });
    }
    for (const e of m.upsertEdges || []) {
      for (const end of [e.key.source, e.key.target]) {
        if (tx.get(key('node', sp, end)) === null) {
          throw new StoreError('missing_endpoint', `space ${sp} edge ${e.key.source}-[${e.key.type}]->${e.key.target}: no node ${end}`);
        }
      }
    }
    for (const e of m.upsertEdges || []) {
      const k = key('edge', sp, edgeId(e.key));
      const old = tx.get(k);
      if (old === null) tx.put(k, { key: edgeKey(e.key), properties: { ...props(e.properties) } });
      else tx.put(k, { ...old, properties: { ...old.properties, ...props(e.properties) } });
    }
    return {};
  }),
  'graph.readRecords': (req, a) => read((tx) => ({
    nodes: [...tx.scan(key('node', a.space, '')).values()],
    edges: [...tx.scan(key('edge', a.space, '')).values()],
  })),

  // ------------------------------------------------------------ locks
  'locks.tryAcquire': (req, a) => transact(req, (tx) => {
    const lk = key('lease', a.space, a.documentId);
    const cur = tx.get(lk);
    if (cur !== null && a.now < cur.expiresAt) {
      if (cur.holder !== a.holder) return { lease: cur, acquired: false };
      const lease = { ...cur, expiresAt: a.now + a.ttlMillis };
      tx.put(lk, lease);
      return { lease, acquired: true };
    }
    const ck = key('leaseToken', a.space, a.documentId);
    const token = int(tx.get(ck)) + 1;
    const lease = { space: a.space, documentId: a.documentId, holder: a.holder, token, expiresAt: a.now + a.ttlMillis };
    tx.put(ck, token);
    tx.put(lk, lease);
    return { lease, acquired: true };
  }),
  'locks.renew': (req, a) => transact(req, (tx) => {
    const l = a.lease;
    const lk = key('lease', l.space, l.documentId);
    const cur = tx.get(lk);
    if (cur === null || cur.holder !== l.holder || cur.token !== l.token || !(a.now < cur.expiresAt)) {
      throw new StoreError('lease_lost', `lease on ${l.space}/${l.documentId} token ${l.token} of ${l.holder}`);
    }
    const lease = { ...cur, expiresAt: a.now + a.ttlMillis };
    tx.put(lk, lease);
    return { lease };
  }),
  'locks.release': (req, a) => transact(req, (tx) => {
    const l = a.lease;
    const lk = key('lease', l.space, l.documentId);
    const cur = tx.get(lk);
    if (cur === null || cur.holder !== l.holder || cur.token !== l.token) {
      throw new StoreError('lease_lost', `lease on ${l.space}/${l.documentId} token ${l.token} of ${l.holder}`);
    }
    tx.del(lk);
    return {};
  }),

  // ------------------------------------------------------------ System B
  'checkpoints.load': (req, a) => read((tx) => ({ checkpoint: tx.get(key('ckpt', a.threadId)) })),
  'checkpoints.put': (req, a) => transact(req, (tx) => {
    tx.put(key('ckpt', a.checkpoint.threadId), a.checkpoint);
    return {};
  }),
  'plans.save': (req, a) => transact(req, (tx) => {
    const k = key('plan', a.owner, a.operationId); // UNIQUE(owner, operation_id)
    const row = tx.get(k);
    if (row !== null) {
      if (row.question !== a.question || row.minutes !== a.minutes) {
        throw new StoreError('plan_conflict', `owner ${a.owner} operation ${a.operationId}: row ${row.id} has other content`);
      }
      return { id: row.id };
    }
    const id = int(tx.get('planSeq')) + 1;
    tx.put('planSeq', id);
    tx.put(k, { id, owner: a.owner, operationId: a.operationId, question: a.question, minutes: a.minutes });
    return { id };
  }),
  'plans.list': (req, a) => read((tx) => {
    const rows = [...tx.scan(key('plan', a.owner, '')).values()];
    rows.sort((x, y) => x.id - y.id);
    return { rows };
  }),
};

// ---------------------------------------------------------------- main loop

function handle(req) {
  const a = req.args || {};
  if (req.op === 'hello') {
    if (a.protocol !== PROTOCOL) throw new StoreError('unsupported', `protocol ${a.protocol}: this store speaks ${PROTOCOL}`);
    const dir = a.dir || process.env.CRASHMATRIX_STORE_DIR;
    if (!dir) throw new StoreError('invalid_argument', 'hello: no dir');
    if (txnDir !== null) throw new StoreError('unsupported', 'hello again before close');
    SYNC = !process.argv.includes('--no-sync') && a.mutant !== 'synchronous-off';
    openStore(dir);
    // reopen: the data is opened here, at hello, so crashmatrix may keep
    // this process for another case's snapshot after close (section 3).
    return {
      protocol: PROTOCOL,
      name: 'nodestore',
      stores: ['operations', 'states', 'registry', 'graph', 'locks', 'checkpoints', 'plans'],
      reopen: true,
    };
  }
  if (req.op === 'close') {
    // Let go of the case's data: nothing read before close is served
    // after it; the next request is a hello.
    txnDir = null;
    tmpDir = null;
    applied = 0;
    kv.clear();
    return {};
  }
  if (txnDir === null) throw new StoreError('invalid_argument', `${req.op} before hello`);
  const h = handlers[req.op];
  if (!h) throw new StoreError('unsupported', `unknown op ${req.op}`);
  return h(req, a);
}

function main() {
  for (;;) {
    const line = readLine();
    if (line === null) process.exit(0);
    if (line.trim() === '') continue;
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      log(`not JSON on stdin: ${line}`);
      process.exit(2);
    }
    current = { id: req.id, steps: 0 };
    let out;
    try {
      out = { id: req.id, ok: handle(req) };
    } catch (e) {
      if (e instanceof StoreError) {
        out = { id: req.id, error: { code: e.code, definite: e.definite, message: e.message } };
      } else {
        log(`${req.op}: ${e.stack}`);
        out = { id: req.id, error: { code: 'permanent', definite: false, message: `${req.op}: ${e.message}` } };
      }
    }
    current = null;
    writeLine(out);
  }
}

main();
