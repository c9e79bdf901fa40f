/**
 * Imports only point down. Each row is a layer, lowest first: a folder may import its own files
 * and any folder of a lower row, never one of its own row or above. `npm test` runs this
 * (test/unit/layers.test.ts); `npx depcruise src config adapters bench` shows the same.
 */
const LAYERS = [
  ['src/shared'],
  ['adapters'],
  ['config'],
  ['src/accounts', 'src/api_keys', 'src/grants', 'src/keys', 'src/rate_limits'],
  ['src/clients'],
  ['src/tokens'],
  ['src/engine'],
  ['src/pages', 'src/resource'],
  ['src/interactions', 'src/settings'],
  ['src/http', 'src/cli'],
  ['src/main.ts'],
];

const escape = (path) => path.replace(/[.]/g, '\\.');
const under = (folder) => (folder.endsWith('.ts') ? `^${escape(folder)}$` : `^${escape(folder)}/`);

const upward = LAYERS.flatMap((row, index) => row.flatMap((folder) => {
  const notBelow = LAYERS.slice(index).flat().filter((other) => other !== folder);
  if (notBelow.length === 0) return [];
  return [{
    name: `${folder.replace(/^src\//, '')}-imports-only-down`,
    comment: `${folder} may import only what lies below it: ${LAYERS.slice(0, index).flat().join(', ') || 'nothing of the project'}`,
    severity: 'error',
    from: { path: under(folder) },
    to: { path: notBelow.map(under) },
  }];
}));

module.exports = {
  forbidden: [
    ...upward,
    {
      name: 'no-circular',
      comment: 'modules that import each other, however indirectly',
      severity: 'error',
      from: { path: '^(src|config|adapters|bench)/' },
      to: { circular: true },
    },
    {
      name: 'config-imports-nothing-from-src',
      comment: 'configuration is read before anything of the service exists: it stands on its own (and on the adapters, for storage URLs)',
      severity: 'error',
      from: { path: '^config/' },
      to: { path: '^src/' },
    },
    {
      name: 'bench-uses-test-support-only',
      comment: 'the benchmark may share the tests\' support code, nothing else of test/',
      severity: 'error',
      from: { path: '^bench/' },
      to: { path: '^test/', pathNot: '^test/support/' },
    },
    {
      name: 'product-never-imports-tests-or-bench',
      severity: 'error',
      from: { path: '^(src|config|adapters)/' },
      to: { path: '^(test|bench|conformance)/' },
    },
  ],
  options: {
    // TypeScript 7 has no compiler API yet; swc reads the sources (type-only imports included).
    parser: 'swc',
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
  },
};
