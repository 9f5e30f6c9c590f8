// Loaded before the conformance suite (node --import): the suite's client
// has no option for a bearer token, and capsule serve authenticates every
// request, loopback included (docs/serve.md). Every HTTP request made
// through undici (Node's fetch and undici.request, which share the global
// dispatcher) gets `Authorization: Bearer $CAPSULE_CONFORMANCE_TOKEN`.
// Nothing else about a request changes: Host and Origin stay the suite's.
import { Agent, setGlobalDispatcher } from 'undici';

const token = process.env.CAPSULE_CONFORMANCE_TOKEN;
if (!token) throw new Error('conformance-auth.mjs: CAPSULE_CONFORMANCE_TOKEN is not set');
const auth = `Bearer ${token}`;

function withAuth(headers) {
  if (!headers) return { authorization: auth };
  if (Array.isArray(headers)) return [...headers, 'authorization', auth];
  if (typeof headers[Symbol.iterator] === 'function' && typeof headers !== 'string')
    return [...[...headers].flat(), 'authorization', auth];
  return { ...headers, authorization: auth };
}

setGlobalDispatcher(
  new Agent().compose((dispatch) => (opts, handler) => dispatch({ ...opts, headers: withAuth(opts.headers) }, handler))
);
