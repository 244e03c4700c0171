// Tests read many JSON bodies whose shape the assertions check; let `res.json()` be `any`
// there instead of `unknown` (declaration merging puts this overload first).
interface Body {
  json(): Promise<any>;
}
interface Response {
  json(): Promise<any>;
}
