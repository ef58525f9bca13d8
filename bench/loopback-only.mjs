// Preloaded into Portkey's gateway (node --import): its start-server listens on every interface,
// and the benchmark must stay on 127.0.0.1. A listen() given only a port gets host 127.0.0.1.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const [first] = args;
  if (typeof first === 'number') return listen.call(this, first, '127.0.0.1', ...args.slice(1).filter((a) => typeof a === 'function'));
  if (first && typeof first === 'object' && !first.host && first.port !== undefined)
    return listen.call(this, { ...first, host: '127.0.0.1' }, ...args.slice(1));
  return listen.apply(this, args);
};
