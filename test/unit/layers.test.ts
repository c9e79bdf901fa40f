import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';
import { cruise, type ICruiseResult, type IViolation } from 'dependency-cruiser';
import extractDepcruiseConfig from 'dependency-cruiser/config-utl/extract-depcruise-config';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const RULES = join(ROOT, '.dependency-cruiser.cjs');

/** The violations of the project's import rules (.dependency-cruiser.cjs) among `paths`, read from `baseDir`. */
async function violations(paths: string[], baseDir: string): Promise<IViolation[]> {
  const config = await extractDepcruiseConfig(RULES);
  const { output } = await cruise(paths, { ...config.options, ruleSet: { forbidden: config.forbidden ?? [] }, validate: true, baseDir }) as { output: ICruiseResult };
  return output.summary.violations;
}

const shown = (found: IViolation[]) => found.map(({ rule, from, to, cycle }) => `${rule.name}: ${from} -> ${cycle?.map((step) => step.name).join(' -> ') ?? to}`);

describe('imports only point down (.dependency-cruiser.cjs)', function () {
  this.timeout(60_000);

  it('no folder imports one of its own layer or above, no modules import each other, bench uses only test/support', async () => {
    const found = await violations(['src', 'config', 'adapters', 'bench'], ROOT);
    expect(shown(found), 'npx depcruise src config adapters bench --config .dependency-cruiser.cjs').to.deep.equal([]);
  });

  it('finds an upward import, an import between two folders of one layer, config importing src, and a cycle', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'layers-'));
    const files: Record<string, string> = {
      'src/shared/clock.ts': "import { settingsRouter } from '../settings/router.ts';\nexport const clock = settingsRouter;\n",
      'src/settings/router.ts': "export const settingsRouter = 1;\n",
      'src/tokens/verifier.ts': "import { newKeys } from '../keys/keys.ts';\nexport const verify = newKeys;\n",
      'src/keys/keys.ts': "import { grant } from '../grants/grants.ts';\nexport const newKeys = grant;\n",
      'src/grants/grants.ts': "export const grant = 1;\n",
      'config/index.ts': "import { verify } from '../src/tokens/verifier.ts';\nexport const config = verify;\n",
      'config/lifetimes.ts': "import { clock } from '../src/shared/clock.ts';\nexport const lifetimes = clock;\n",
      'src/engine/a.ts': "import { b } from './b.ts';\nexport const a = () => b;\n",
      'src/engine/b.ts': "import { a } from './a.ts';\nexport const b = () => a;\n",
    };
    try {
      for (const [path, text] of Object.entries(files)) {
        await mkdir(dirname(join(dir, path)), { recursive: true });
        await writeFile(join(dir, path), text);
      }
      const found = shown(await violations(['src', 'config'], dir));
      expect(found).to.include.members([
        'shared-imports-only-down: src/shared/clock.ts -> src/settings/router.ts',
        'keys-imports-only-down: src/keys/keys.ts -> src/grants/grants.ts',
        'config-imports-only-down: config/index.ts -> src/tokens/verifier.ts',
        'config-imports-nothing-from-src: config/lifetimes.ts -> src/shared/clock.ts',
      ]);
      expect(found.some((line) => line.startsWith('no-circular: src/engine/a.ts'))).to.equal(true);
      // Downward imports are fine.
      expect(found.join('\n')).to.not.include('src/tokens/verifier.ts -> src/keys/keys.ts');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
