import { Elysia } from "elysia";
import type { RouteModule } from "../http/route-module";
import { catalogFor } from "../catalog";
import { usageMeterFor } from "./index";

/**
 * No routes: builds the catalog at start-up (so a bad `catalog` section in CONFIG_FILE
 * stops the service at once instead of failing the first request) and creates the usage
 * meter early, so its shutdown drain is registered before any request can record usage.
 */
export const meteringModule: RouteModule = {
  surfaces: [],
  routes: () => new Elysia({ name: "metering" }),
  async start(s) {
    catalogFor(s);
    usageMeterFor(s);
  },
};
