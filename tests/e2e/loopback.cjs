// Preloaded with `node --require`: a server that is told only a port listens on 127.0.0.1, not on every
// interface (the tests' rule; the reference servers' `app.listen(PORT)` takes no host).
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const portOnly = typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]));
  if (portOnly && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
