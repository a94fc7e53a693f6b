// An inert stand-in: any property read, call or construction gives another inert value, so
// user-interface code reached on the way (jQuery chains, toasts, event buses) does nothing.
// It is not thenable (awaiting it yields it) and turns into '' in a string.
export function inert(label = 'inert') {
    const target = function () {};
    const handler = {
        get(_t, key) {
            if (key === 'then') return undefined;
            if (key === Symbol.toPrimitive) return () => '';
            if (key === Symbol.iterator) return function* () {};
            if (key === 'toString' || key === 'valueOf') return () => '';
            if (key === 'length') return 0;
            return proxy;
        },
        apply() { return proxy; },
        construct() { return proxy; },
        set() { return true; },
        has() { return false; },
    };
    const proxy = new Proxy(target, handler);
    return proxy;
}
