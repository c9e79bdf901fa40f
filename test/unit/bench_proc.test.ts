import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';

import { expect } from 'chai';

import { cpuSeconds, mainThreadCpuSeconds, residentBytes } from '../../bench/report/proc.ts';

/** A child that spends `seconds` of CPU, says so, then idles until killed. */
const BURN = (seconds: number) => `
const start = process.cpuUsage();
while ((process.cpuUsage(start).user + process.cpuUsage(start).system) / 1e6 < ${seconds});
console.log('burnt');
setInterval(() => {}, 1000);
`;

/** A parent that idles with one such child, as a supervisor with its worker; it relays the child's output. */
const SUPERVISOR = `
const child = require('node:child_process').spawn(process.execPath, ['-e', ${JSON.stringify(BURN(0.5))}], { stdio: ['ignore', 'inherit', 'inherit'] });
process.on('SIGTERM', () => { child.kill(); process.exit(0); });
setInterval(() => {}, 1000);
`;

/** The bench's server figures, with WORKERS above 1 a supervisor whose workers serve. */
describe('bench process figures', () => {
  it('count the CPU and memory of a server\'s workers with its own', async () => {
    const supervisor = spawn(process.execPath, ['-e', SUPERVISOR], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const [line] = await once(supervisor.stdout, 'data') as [Buffer];
      expect(line.toString()).to.contain('burnt');
      const pid = supervisor.pid!;
      const ownStat = await readFile(`/proc/${pid}/stat`, 'utf8');
      const ownFields = ownStat.slice(ownStat.lastIndexOf(')') + 2).split(' ');
      const ownCpu = (Number(ownFields[11]) + Number(ownFields[12])) / 100;
      expect(ownCpu, 'the supervisor alone idles').to.be.below(0.5);
      expect(await cpuSeconds(pid)).to.be.at.least(0.5);
      expect(await mainThreadCpuSeconds(pid)).to.be.at.least(0.5);
      const ownRss = Number(/^VmRSS:\s+(\d+)/m.exec(await readFile(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
      expect(await residentBytes(pid)).to.be.above(ownRss * 1.5);
    } finally {
      supervisor.kill('SIGTERM');
    }
  });

  it('are undefined for a process that is gone', async () => {
    const gone = spawn(process.execPath, ['-e', '']);
    await once(gone, 'exit');
    expect(await cpuSeconds(gone.pid!)).to.equal(undefined);
    expect(await residentBytes(gone.pid!)).to.equal(undefined);
  });
});
