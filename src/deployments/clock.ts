export { type Clock, clockOf, setClock, systemClock } from "../clock";
