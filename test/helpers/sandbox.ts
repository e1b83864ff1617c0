import { SandboxControl } from '../../src/sandbox/controlClient.js';
import { type RunningSandbox, type SandboxOptions, startSandbox } from '../../src/sandbox/server.js';

/** A running sandbox with its control client, as every test that needs the platform starts it. */
export type TestSandbox = RunningSandbox & { readonly control: SandboxControl };

/** The emulated platform on a free loopback port; `close()` it after the tests. */
export async function testSandbox(options: SandboxOptions = {}): Promise<TestSandbox> {
  const sandbox = await startSandbox({ port: 0, ...options });
  return Object.assign(sandbox, { control: new SandboxControl(sandbox.url) });
}
