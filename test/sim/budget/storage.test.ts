import { familyBudget } from '../budget.js';

familyBudget('storage');
