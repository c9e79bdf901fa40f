/**
 * The signals that stop the service cleanly: requests in flight finish, then it exits. SIGHUP
 * among them: sent when the terminal that started the service closes, or by an operator expecting
 * a reload, it would otherwise be Node's default, an exit on the spot that cuts every request in
 * flight. Nothing is reloaded on it: the configuration is read once, at start.
 */
export const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;
