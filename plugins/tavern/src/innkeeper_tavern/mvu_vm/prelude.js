// The environment of a card-declared MVU command processor (docs/mvu.md "Card command
// processors"). Evaluated once per VM before the card's declaration. It gives the declaration
// only what spec/MVU.md "Source precommit command Helpers" names: eventOn, eventMakeLast,
// waitGlobalInitialized('Mvu'), Mvu.events.COMMAND_PARSED and the operation gate. There is no
// DOM, module import, network, file, timer or host function.
'use strict';
(function () {
  const COMMAND_PARSED = 'mag_command_parsed';
  const INITIALIZED = 'global_Mvu_initialized';
  const listeners = new Map();
  const waiters = [];
  const state = { initialized: false, async: false, gate: null };

  function isAsync(fn) {
    const tag = fn[Symbol.toStringTag];
    return tag === 'AsyncFunction' || tag === 'AsyncGeneratorFunction';
  }
  function list(name) {
    let found = listeners.get(name);
    if (found === undefined) {
      found = [];
      listeners.set(name, found);
    }
    return found;
  }
  function checked(name, fn) {
    if (typeof name !== 'string') throw new TypeError('an event name is a string');
    if (typeof fn !== 'function') throw new TypeError('a listener is a function');
    if (isAsync(fn) && name === COMMAND_PARSED) {
      state.async = true;
      throw new TypeError('async COMMAND_PARSED listeners are rejected');
    }
  }
  function remove(name, fn) {
    const found = list(name);
    const at = found.indexOf(fn);
    if (at >= 0) found.splice(at, 1);
  }
  function eventOn(name, fn) {
    checked(name, fn);
    if (name === INITIALIZED && state.initialized) {
      fn();
    } else if (!list(name).includes(fn)) {
      list(name).push(fn);
    }
    return { stop: () => remove(name, fn) };
  }
  function eventMakeLast(name, fn) {
    checked(name, fn);
    remove(name, fn);
    list(name).push(fn);
    return { stop: () => remove(name, fn) };
  }
  function eventOnce(name, fn) {
    checked(name, fn);
    const once = function (...args) {
      remove(name, once);
      return fn(...args);
    };
    list(name).push(once);
    return { stop: () => remove(name, once) };
  }
  function waitGlobalInitialized(name) {
    if (name !== 'Mvu') return Promise.reject(new Error('only Mvu is available here'));
    if (state.initialized) return Promise.resolve();
    return new Promise((resolve) => waiters.push(resolve));
  }
  function freeze(value) {
    if (value !== null && typeof value === 'object') {
      for (const key of Object.keys(value)) freeze(value[key]);
      Object.freeze(value);
    }
    return value;
  }
  const noop = function () {};
  const Mvu = Object.freeze({
    events: Object.freeze({
      VARIABLE_INITIALIZED: 'mag_variable_initiailized',
      VARIABLE_UPDATE_STARTED: 'mag_variable_update_started',
      COMMAND_PARSED: COMMAND_PARSED,
      VARIABLE_UPDATE_ENDED: 'mag_variable_update_ended',
      SINGLE_VARIABLE_UPDATED: 'mag_variable_updated',
    }),
    getOperationGate: () => state.gate,
  });
  Object.defineProperties(globalThis, {
    Mvu: { value: Mvu },
    eventOn: { value: eventOn },
    eventMakeLast: { value: eventMakeLast },
    eventOnce: { value: eventOnce },
    eventRemoveListener: { value: remove },
    waitGlobalInitialized: { value: waitGlobalInitialized },
    console: { value: Object.freeze({ log: noop, info: noop, warn: noop, error: noop, debug: noop }) },
  });
  const host = {
    // The initialization: COMMAND_PARSED listeners registered by now are the processor's.
    initialize() {
      state.initialized = true;
      for (const resolve of waiters.splice(0)) resolve();
      for (const fn of list(INITIALIZED).splice(0)) fn();
    },
    listenerCount: () => list(COMMAND_PARSED).length,
    rejectedAsync: () => state.async,
    // One COMMAND_PARSED dispatch: listeners in order, on private copies; the command views
    // after them, as JSON.
    dispatch(variablesJson, commandsJson, messageContent, gateJson) {
      const variables = JSON.parse(variablesJson);
      const commands = JSON.parse(commandsJson);
      state.gate = gateJson === null ? null : freeze(JSON.parse(gateJson));
      try {
        for (const fn of list(COMMAND_PARSED).slice()) {
          const result = fn(variables, commands, messageContent);
          if (result !== null && (typeof result === 'object' || typeof result === 'function') &&
              typeof result.then === 'function') {
            state.async = true;
            throw new TypeError('a COMMAND_PARSED listener returned a promise');
          }
        }
      } finally {
        state.gate = null;
      }
      if (!Array.isArray(commands)) throw new TypeError('commands is no longer an array');
      return JSON.stringify(commands.map((c) => (c !== null && typeof c === 'object'
        ? { type: c.type, args: c.args, full_match: c.full_match, reason: c.reason }
        : c)));
    },
  };
  Object.defineProperty(globalThis, '__innkeeperMvu', { value: Object.freeze(host) });
})();
