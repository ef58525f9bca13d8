// The few parts of autocannon's API the benchmark uses (the package ships no types).
declare module 'autocannon' {
  interface Request {
    method?: string;
    headers?: Record<string, string>;
    body?: string;
  }
  interface Client {
    /** Replaces the requests this connection sends in turn. */
    setRequests(requests: Request[]): void;
  }
  interface Options {
    /** Several URLs: the connections are dealt out over them in turn. */
    url: string | string[];
    method?: string;
    headers?: Record<string, string>;
    body?: string;
    connections?: number;
    duration?: number;
    timeout?: number;
    /** Called once for each connection as it is made. */
    setupClient?: (client: Client) => void;
  }
  interface Result {
    requests: { average: number; total: number };
    latency: { p50: number; p99: number };
    non2xx: number;
    errors: number;
    timeouts: number;
    '2xx': number;
  }
  function autocannon(opts: Options): Promise<Result>;
  export default autocannon;
}
