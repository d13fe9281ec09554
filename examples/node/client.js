#!/usr/bin/env node
// Calls the granary.examples.Counter and granary.examples.Chat grains from
// Node.js over plain gRPC, as examples/python/counter_client.py does from
// Python: nothing Granary-specific, only the grains' .proto files (loaded at
// run time by @grpc/proto-loader) and @grpc/grpc-js. The grain key travels
// as metadata `granary-key`, a bearer token (--token_file) as metadata
// `authorization: Bearer TOKEN`.
//
//   npm ci
//   node client.js --gateway=127.0.0.1:30000 --key=alice --add=5 --room=lobby
//
// adds 5 to Counter/alice and reads it back, then watches Chat/lobby, posts a
// message to the room and waits until the watch delivers it, and cancels the
// watch. Against a gateway with TLS and bearer tokens, with the files that
// `scripts/dev-certs.sh certs` writes (--tls_cert/--tls_key are needed only
// when the silo has --tls_client_ca):
//
//   node client.js --gateway=127.0.0.1:30000 --tls_ca=certs/ca.pem \
//       --tls_cert=certs/client.pem --tls_key=certs/client.key \
//       --token_file=certs/token --key=alice --add=5
//
// Exits 0 when every step worked; on a failed call prints the step, the gRPC
// status code (name and number) and its message, and exits 1 (2 for bad
// arguments).
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const {parseArgs} = require('node:util');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const USAGE = `usage: node client.js [--gateway=HOST:PORT] [--key=KEY] [--add=N]
    [--room=ROOM] [--author=NAME] [--text=TEXT] [--proto_root=DIR]
    [--tls_ca=PEM [--tls_cert=PEM --tls_key=PEM]] [--token_file=FILE]
    [--timeout_s=S]

  --gateway     the silo's gateway (default 127.0.0.1:30000)
  --key         which Counter grain (default node-example)
  --add         amount to add to it (default 1)
  --room        which Chat grain to watch and post to (default node-example)
  --author      the post's author (default node)
  --text        the post's text (default "hello from node")
  --proto_root  the Granary source tree holding examples/*.proto and
                proto/granary/options.proto (default: two levels up from
                this file)
  --tls_ca      TLS, trusting this PEM CA (else plaintext)
  --tls_cert    PEM client certificate (with --tls_key)
  --tls_key     PEM private key of --tls_cert
  --token_file  file holding the bearer token
  --timeout_s   deadline of each call and of the watch's wait (default 10)`;

class UsageError extends Error {}

function parseOptions(argv) {
  const {values} = parseArgs({
    args: argv,
    options: {
      gateway: {type: 'string', default: '127.0.0.1:30000'},
      key: {type: 'string', default: 'node-example'},
      add: {type: 'string', default: '1'},
      room: {type: 'string', default: 'node-example'},
      author: {type: 'string', default: 'node'},
      text: {type: 'string', default: 'hello from node'},
      proto_root:
          {type: 'string', default: path.resolve(__dirname, '..', '..')},
      tls_ca: {type: 'string'},
      tls_cert: {type: 'string'},
      tls_key: {type: 'string'},
      token_file: {type: 'string'},
      timeout_s: {type: 'string', default: '10'},
      help: {type: 'boolean', short: 'h', default: false},
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const int64 = 2n ** 63n;
  if (!/^-?\d+$/.test(values.add) || BigInt(values.add) < -int64 ||
      BigInt(values.add) >= int64) {
    throw new UsageError(`--add must be an int64, not "${values.add}"`);
  }
  const timeout = Number(values.timeout_s);
  if (!(timeout > 0)) throw new UsageError('--timeout_s must be positive');
  values.timeout_ms = timeout * 1000;
  if ((values.tls_cert === undefined) !== (values.tls_key === undefined)) {
    throw new UsageError('--tls_cert and --tls_key go together');
  }
  if (values.tls_cert !== undefined && values.tls_ca === undefined) {
    throw new UsageError('--tls_cert needs --tls_ca');
  }
  return values;
}

// A failed step: what was being done and the call's status.
class CallError extends Error {
  constructor(step, error) {
    super(step);
    this.step = step;
    this.code = error.code;
    this.details = error.details || error.message;
  }
}

function codeName(code) {
  const name = Object.keys(grpc.status).find((k) => grpc.status[k] === code);
  return name || 'UNKNOWN_CODE';
}

function loadProtos(root) {
  const files = ['examples/counter.proto', 'examples/chat.proto'];
  for (const f of [...files, 'proto/granary/options.proto']) {
    if (!fs.existsSync(path.join(root, f))) {
      throw new UsageError(
          `${path.join(root, f)} not found: ` +
          '--proto_root names the Granary source tree');
    }
  }
  const definition = protoLoader.loadSync(files, {
    // options.proto's import name is granary/options.proto.
    includeDirs: [root, path.join(root, 'proto')],
    keepCase: true,  // field names as in the .proto files
    longs: String,   // int64/uint64 (values, seqs) as decimal strings
    defaults: true,
  });
  return grpc.loadPackageDefinition(definition).granary.examples;
}

function credentials(opts) {
  if (opts.tls_ca === undefined) return grpc.credentials.createInsecure();
  const read = (file) => fs.readFileSync(file);
  return grpc.credentials.createSsl(
      read(opts.tls_ca), opts.tls_key ? read(opts.tls_key) : null,
      opts.tls_cert ? read(opts.tls_cert) : null);
}

// The metadata of a call to grain KEY.
function metadataFor(key, token) {
  const md = new grpc.Metadata();
  md.set('granary-key', key);
  if (token !== undefined) md.set('authorization', 'Bearer ' + token);
  return md;
}

function unary(client, method, request, md, opts, step) {
  return new Promise((resolve, reject) => {
    const deadline = new Date(Date.now() + opts.timeout_ms);
    client[method](request, md, {deadline}, (error, reply) => {
      if (error) {
        reject(new CallError(step, error));
      } else {
        resolve(reply);
      }
    });
  });
}

async function counter(examples, channelArgs, opts, token) {
  const client = new examples.Counter(...channelArgs);
  try {
    const md = metadataFor(opts.key, token);
    const name = `Counter/${opts.key}`;
    const added =
        await unary(client, 'Add', {amount: opts.add}, md, opts, `${name} Add`);
    console.log(`${name} Add(${opts.add}) -> ${added.value}`);
    const got = await unary(client, 'Get', {}, md, opts, `${name} Get`);
    console.log(`${name} Get() -> ${got.value}`);
  } finally {
    client.close();
  }
}

// Watches the room, posts to it until the watch delivers one of the posts
// (the subscription is in place only once the room has taken the Watch call,
// which the client is not told of), then cancels the watch.
async function chat(examples, channelArgs, opts, token) {
  const client = new examples.Chat(...channelArgs);
  const name = `Chat/${opts.room}`;
  const md = metadataFor(opts.room, token);
  // after_seq past any seq: no replay of the room's earlier messages.
  const watch = client.Watch({after_seq: '18446744073709551615'}, md);
  const received = new Map();  // seq -> message
  let arrived = () => {};      // wakes the poster when a message comes in
  let ended = null;            // the watch's final status, once it ended
  let cancelled = false;
  const done = new Promise((resolve) => {
    watch.on('data', (m) => {
      received.set(m.seq, m);
      arrived();
    });
    // A stream ends with an 'error' event (any non-OK status, CANCELLED
    // after cancel() too) or an 'end' then a 'status' event (OK).
    watch.on('error', (error) => {
      ended = error;
      arrived();
      resolve();
    });
    watch.on('status', (status) => {
      if (status.code === grpc.status.OK) {
        ended = status;
        arrived();
        resolve();
      }
    });
  });
  try {
    const deadline = Date.now() + opts.timeout_ms;
    let delivered = null;
    for (let attempt = 1; delivered === null; attempt++) {
      if (ended !== null) {
        // The room ended the watch (UNAVAILABLE when it deactivated).
        const early = {
          code: ended.code,
          details: 'it ended before a post came'
        };
        throw new CallError(
            `${name} Watch`, ended.code === grpc.status.OK ? early : ended);
      }
      if (Date.now() >= deadline) {
        throw new CallError(`${name} Watch`, {
          code: grpc.status.DEADLINE_EXCEEDED,
          details: `no post reached the watch within ${opts.timeout_s} s`,
        });
      }
      const text = `${opts.text} #${attempt}`;
      const reply = await unary(
          client, 'Post', {author: opts.author, text}, md, opts,
          `${name} Post`);
      // Until the room has the watcher, a post reaches no one: try again soon.
      // Past that, wait a while for the message to come in (another watcher of
      // the room may have been the one that got it).
      const wait = reply.delivered > 0 ? 2000 : 50;
      const until = Math.min(deadline, Date.now() + wait);
      while (!received.has(reply.seq) && ended === null && Date.now() < until) {
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, until - Date.now());
          arrived = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      if (received.has(reply.seq)) delivered = received.get(reply.seq);
    }
    console.log(
        `${name} Watch received seq=${delivered.seq} ` +
        `${delivered.author}: ${delivered.text}`);
    cancelled = true;
    watch.cancel();
    await done;
    if (ended.code !== grpc.status.CANCELLED && ended.code !== grpc.status.OK) {
      throw new CallError(`${name} Watch`, ended);
    }
    console.log(`${name} Watch ended (${codeName(ended.code)})`);
  } finally {
    if (!cancelled) watch.cancel();
    client.close();
  }
}

async function main() {
  let opts;
  let examples;
  let token;
  let creds;
  try {
    opts = parseOptions(process.argv.slice(2));
    examples = loadProtos(opts.proto_root);
    if (opts.token_file !== undefined) {
      token = fs.readFileSync(opts.token_file, 'utf8').trim();
    }
    creds = credentials(opts);
  } catch (e) {
    console.error(`client.js: ${e.message}`);
    if (e instanceof UsageError || e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ||
        e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' ||
        e.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      console.error(USAGE);
      return 2;
    }
    return 1;
  }
  const channelArgs = [opts.gateway, creds];
  try {
    await counter(examples, channelArgs, opts, token);
    await chat(examples, channelArgs, opts, token);
  } catch (e) {
    if (!(e instanceof CallError)) throw e;
    console.error(
        `client.js: ${e.step} failed: ${codeName(e.code)} ` +
        `(code ${e.code}): ${e.details}`);
    return 1;
  }
  return 0;
}

main().then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      console.error('client.js:', e);
      process.exitCode = 1;
    });
