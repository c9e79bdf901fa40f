// `npm start`: the service (src/main.ts), once the Node.js running it is known to be able to.
import { nodeIsRecentEnough } from './node_version.js';

if (nodeIsRecentEnough()) import('../src/main.ts');
