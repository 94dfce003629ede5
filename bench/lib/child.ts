import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Runs a bench/lib script in its own process and parses the JSON it prints. */
export function runChild<T>(
  script: string,
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<T> {
  const file = fileURLToPath(new URL(`./${script}`, import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file, ...args], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ...env },
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${script} exited with ${code}`));
      try {
        resolve(JSON.parse(out) as T);
      } catch (err) {
        reject(err);
      }
    });
  });
}
