// The egress rules moved to src/egress/; this name stays for modules that still import it from here.
export { egressPolicyFromEnv } from "../egress";
