package connect

// This file writes MAP values as JsonConverter.convertToJson does
// (connect/json/src/main/java/org/apache/kafka/connect/json/JsonConverter.java).

// appendMap appends a MAP value: a JSON object when the keys are strings
// (by the key schema, or, schemaless, when every key is a string), else an
// array of [key, value] pairs. Object keys are the key node's asText(); a
// repeated key keeps its first position and its last value, as
// ObjectNode.set does.
func (c JSONConverter) appendMap(dst []byte, s *Schema, m Map) ([]byte, error) {
	var keys, values *Schema
	objectMode := true
	if s != nil {
		keys, values = s.Keys, s.Values
		objectMode = keys != nil && keys.Type == TypeString
	} else {
		for _, e := range m {
			if _, ok := e.Key.(string); !ok {
				objectMode = false
				break
			}
		}
	}
	var err error
	if !objectMode {
		dst = append(dst, '[')
		for i, e := range m {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '[')
			if dst, err = c.appendValue(dst, keys, e.Key); err != nil {
				return dst, err
			}
			dst = append(dst, ',')
			if dst, err = c.appendValue(dst, values, e.Value); err != nil {
				return dst, err
			}
			dst = append(dst, ']')
		}
		return append(dst, ']'), nil
	}
	type member struct {
		key   string
		value []byte
	}
	var members []member
	for _, e := range m {
		text, err := c.keyText(keys, e.Key)
		if err != nil {
			return dst, err
		}
		val, err := c.appendValue(nil, values, e.Value)
		if err != nil {
			return dst, err
		}
		replaced := false
		for i := range members {
			if members[i].key == text {
				members[i].value, replaced = val, true
				break
			}
		}
		if !replaced {
			members = append(members, member{text, val})
		}
	}
	dst = append(dst, '{')
	for i, mb := range members {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = AppendJSONString(dst, mb.key); err != nil {
			return dst, err
		}
		dst = append(dst, ':')
		dst = append(dst, mb.value...)
	}
	return append(dst, '}'), nil
}

// keyText returns the asText() of the JSON node convertToJson makes of a
// map key in object mode: the string itself, or "null" for a null node.
func (c JSONConverter) keyText(keys *Schema, k any) (string, error) {
	if _, err := c.appendValue(nil, keys, k); err != nil {
		return "", err
	}
	if k == nil && keys != nil && keys.Default != nil && !c.KeepNulls {
		k = keys.Default
	}
	switch x := k.(type) {
	case nil:
		return "null", nil
	case string:
		return x, nil
	}
	return "", errorfUnsupported("a map key of %s in a string-keyed map", javaClass(k))
}
