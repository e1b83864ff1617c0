import { makeLogger, SecretScrubber } from '../../src/log.js';

/** A logger that writes nothing, for the parts under test that need one. */
export const quietLog = makeLogger({ level: 'silent', scrubber: new SecretScrubber() });
