/**
 * A TCP proxy in the test process, between the service and a dependency (PostgreSQL, Redis, S3, another
 * Gatehouse), that can break the path on demand without touching the shared server behind it:
 *
 * - `dropAll()` cuts every open connection (both sides, as a server restart or a network blip does);
 * - `stallAll()` stops forwarding on the open connections, which stay open (a hung server);
 * - `refuse()` closes the listening socket, so new connections get ECONNREFUSED, until `accept()`;
 * - `mode = 'reset'` accepts new connections and resets them at once (a server that dies on accept);
 * - `mode = 'blackhole'` accepts new connections and never forwards a byte (a host that vanished:
 *   the client's own timeouts have to notice).
 *
 * With several targets, each new connection goes to the next one in turn (round robin). It listens on
 * 127.0.0.1 on an ephemeral port; `url(original)` rewrites a dependency's URL to go through it.
 */
import net from 'node:net';

export interface Target {
  host: string;
  port: number;
}

export type ProxyMode = 'forward' | 'reset' | 'blackhole';

export interface TcpProxy {
  readonly port: number;
  /** What a new connection meets; 'forward' by default. */
  mode: ProxyMode;
  /** Connections open now (client side). */
  readonly open: number;
  /** Connections accepted since the start (including reset and blackholed ones). */
  readonly accepted: number;
  /** `original` (e.g. postgres://u@127.0.0.1:5432/db) with its host and port replaced by the proxy's. */
  url(original: string): string;
  /** Destroys every open connection, on both sides. */
  dropAll(): void;
  /**
   * Stops forwarding on every open connection, which stays open (a server that hangs, a partition that
   * drops packets): only the client's own timeouts can notice. Combine with mode 'blackhole' for new ones.
   */
  stallAll(): void;
  /** Stops listening: new connections are refused (ECONNREFUSED) until `accept()`. Open ones stay. */
  refuse(): Promise<void>;
  /** Listens again, on the same port. */
  accept(): Promise<void>;
  /** Stops listening and destroys every connection. */
  close(): Promise<void>;
}

/** `host:port` or a URL's host part, as a Target. */
export function targetOf(url: string): Target {
  const u = new URL(url);
  const port = Number(u.port) || { 'postgres:': 5432, 'postgresql:': 5432, 'redis:': 6379 }[u.protocol] || 80;
  return { host: u.hostname, port };
}

export async function startTcpProxy(targets: Target | Target[]): Promise<TcpProxy> {
  const list = Array.isArray(targets) ? targets : [targets];
  if (list.length === 0) throw new Error('startTcpProxy needs a target');
  const pairs = new Set<{ client: net.Socket; upstream?: net.Socket }>();
  let next = 0;
  let accepted = 0;
  let mode: ProxyMode = 'forward';

  const onConnection = (client: net.Socket) => {
    accepted += 1;
    client.on('error', () => {});
    if (mode === 'reset') {
      client.resetAndDestroy();
      return;
    }
    const pair: { client: net.Socket; upstream?: net.Socket } = { client };
    pairs.add(pair);
    client.on('close', () => {
      pairs.delete(pair);
      pair.upstream?.destroy();
    });
    if (mode === 'blackhole') {
      // Reads and drops whatever the client sends, answers nothing.
      client.resume();
      return;
    }
    const target = list[next++ % list.length] as Target;
    const upstream = net.connect(target.port, target.host);
    pair.upstream = upstream;
    upstream.on('error', () => {});
    upstream.on('close', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  };

  // A new server per listening spell: a closed one still counts its open connections until they end.
  let server: net.Server | undefined;
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const s = net.createServer({ noDelay: true }, onConnection);
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => {
        s.off('error', reject);
        server = s;
        resolve((s.address() as net.AddressInfo).port);
      });
    });
  const port = await listen(0);

  const dropAll = () => {
    for (const pair of pairs) {
      pair.client.destroy();
      pair.upstream?.destroy();
    }
    pairs.clear();
  };
  const stallAll = () => {
    for (const { client, upstream } of pairs) {
      client.unpipe();
      upstream?.unpipe();
      // Still read (and drop) what arrives, as a kernel buffer would, so neither side sees back-pressure.
      client.removeAllListeners('data');
      upstream?.removeAllListeners('data');
      client.on('data', () => {});
      upstream?.on('data', () => {});
    }
  };
  const stopListening = async () => {
    // Stops accepting at once; the connections already open are dropAll's business.
    server?.close();
    server = undefined;
  };

  return {
    port,
    get mode() {
      return mode;
    },
    set mode(m: ProxyMode) {
      mode = m;
    },
    get open() {
      return pairs.size;
    },
    get accepted() {
      return accepted;
    },
    url(original: string) {
      const u = new URL(original);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    dropAll,
    stallAll,
    refuse: stopListening,
    async accept() {
      if (!server) await listen(port);
    },
    async close() {
      await stopListening();
      dropAll();
    },
  };
}
