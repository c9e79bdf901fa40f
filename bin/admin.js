// `npm run admin`: the admin CLI (src/cli/admin.ts), once the Node.js running it is known to be able to.
import { nodeIsRecentEnough } from './node_version.js';

if (nodeIsRecentEnough()) import('../src/cli/admin.ts');
